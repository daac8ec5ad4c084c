"""What is checked of a TensorRT-LLM model, by when: the recipe's cross-field rules at load and the
group's generated configs against each other (`recipe.py`), the built engine's config.json against
the recipe (`engine.py`), and the load rules on a repository's files, offline (`load.py`)."""
