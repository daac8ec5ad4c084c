"""tritonbuild tune: serving configs measured under load, chosen under an SLA, verified bit for
bit."""
