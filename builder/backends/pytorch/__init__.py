"""The PyTorch backend, by concept: the backend (`backend.py`, registered; TorchScript or AOTInductor
from a seeded torch module, or a saved file), the export subprocess (`export.py`, which also exports
to ONNX for onnxruntime) and the libtorch backend's load checks on TorchScript (`rules.py`)."""
