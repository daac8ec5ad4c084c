"""The `vllm.quantize` build step: the recipe key and planned step (`step.py`), what it will write from the
safetensors headers (`plan.py`), the streaming writer (`writer.py`) and the INT4 W4A16 arithmetic
(`int4.py`)."""
