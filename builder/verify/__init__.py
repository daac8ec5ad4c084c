"""Stage 5: repository → VerificationReport (static checks, live load, goldens bit for bit)."""
