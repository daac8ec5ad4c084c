"""What every LLM runtime shares, below the runtimes (tensorrtllm/, vllm/), which import it and
never each other: the checkpoint and tokenizer a recipe names (`checkpoint.py`), the architecture
and memory model read from a Hugging Face config.json (`memory.py`), the GPU tables (`gpus.py`) and
the NGC serving images with what each ships (`images.py`). Nothing here imports a runtime."""
