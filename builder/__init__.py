"""tritonbuild: recipes in, a versioned and verified Triton model repository out."""

# The release line written into manifests and build-cache keys (core/toolchain.py): it moves with
# each release tag, not with each commit, so a rebuilt repository stays byte for byte the same
# between releases. The distribution's own version (pip, `tritonbuild --version`) comes from the git
# tags (pyproject.toml, setuptools-scm).
__version__ = "0.1.0"
