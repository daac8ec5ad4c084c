"""The onnxruntime backend, by concept: the backend (`backend.py`, registered; its recipe type, the
fetch and export steps, I/O from the graph), the execution accelerators (`accelerators.py`) and the
onnxruntime backend's load checks on the ONNX graph (`rules.py`)."""
