"""`serving.determinism: invariant` for vLLM: tritonbuild's vLLM plugin (`plugin.py` and the W4A16
kernel it serves, `w4a16.py`, copied whole into a wheel and run in the server's Python: they never import
tritonbuild), its wheel and the server's environment
(`wheel.py`), the setting x invariance table applied at plan (`table.py`) and the served-log proof
(`served.py`)."""
