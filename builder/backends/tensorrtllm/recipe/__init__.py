"""The TensorRT-LLM recipe (`backend: tensorrtllm`): the recipe type and its sections (`model.py`),
its `lora` section (`lora.py`) and its `speculative` section (`speculative.py`)."""
