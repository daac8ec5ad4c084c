"""tritonbuild: recipes in, a versioned and verified Triton model repository out."""

__version__ = "0.1.0"

# NOTE: the recipe loader checks each recipe with its backend's rules, which the backend registry (a layer
# above recipe/) hands it; importing the registry here wires it in whatever module a caller imports first.
from tritonbuild.backends import registry as _registry  # noqa: F401
