"""tritonbuild: recipes in, a versioned and verified Triton model repository out."""

__version__ = "0.1.0"
