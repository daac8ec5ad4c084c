"""The TensorRT backend, by concept: the backend (`backend.py`, registered; ONNX → a TensorRT plan
through trtexec or TensorRT's Python API) and the Python-API build subprocess (`build.py`)."""
