"""`serving.determinism: invariant` for vLLM: tritonbuild's vLLM plugin (`plugin.py`, copied whole into a
wheel and run in the server's Python: it never imports tritonbuild), its wheel and the server's environment
(`wheel.py`), the setting x invariance table applied at plan (`table.py`) and the served-log proof
(`served.py`)."""
