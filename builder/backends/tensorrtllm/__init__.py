"""TensorRT-LLM backend: HF checkpoint → (quantized) engine → preprocessing / tensorrt_llm /
postprocessing / ensemble (/ BLS) models. The engine build runs TensorRT-LLM's own command lines (or
its LLM API) where it is installed; elsewhere the step is skipped with the reason, or a prebuilt
engine is given (--engine). The backend as registered is backend.py; plan.py plans its steps and
run.py runs them. The recipe type is recipe/, the LLM-API route (runtime: pytorch) llmapi/, and what
is checked at load, after the engine build and on a repository's files checks/."""
