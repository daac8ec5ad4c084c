"""The embedded tritonserver (from nvidia-pytriton) and clients for a given server."""
