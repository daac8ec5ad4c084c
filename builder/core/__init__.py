"""Lowest layer: hashing, canonical JSON, YAML with positions, subprocesses, toolchain. Imports no
stage."""
