"""TensorRT-LLM's LLM API: the LLM-API Python model of `runtime: pytorch` as the repository holds it
(`emit.py`: model.yaml, config.pbtxt, the LoRA step), its tensors (`tensors.py`), what it does with
each recipe key (`keys.py`), the `<name>_openai` adapter in front of it (`adapter.py`), and the
engine build through the LLM API of `engine.build_path: llmapi` (`build.py`, a subprocess entry)."""
