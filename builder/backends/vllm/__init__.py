"""The vLLM backend, by concept: the backend (`backend.py`, registered), its recipe type (`recipe.py`), what
the repository holds (`emit.py`), adopt (`adopt.py`), the load rules (`rules.py`), the recorded vLLM
versions (`versions.py` over the shipped facts), typed and extra engine args (`extra.py`), LoRA, speculative
decoding, the memory plan, the INT4 quantize step (`quantize/`) and `serving.determinism: invariant`
(`invariant/`: the plugin, its wheel, the setting table, the served-log proof)."""
