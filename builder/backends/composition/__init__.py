"""Ensembles and BLS pipelines built from other recipes' models: the two backends (`backend.py`,
registered) and `tritonbuild adopt` of an ensemble (`adopt.py`)."""
