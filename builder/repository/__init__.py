"""Stage 4: BuildResult → a Triton model repository on disk, manifest written last."""
