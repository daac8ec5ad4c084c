"""Stage 6: a verified repository → object storage, never exposing a half-written version."""
