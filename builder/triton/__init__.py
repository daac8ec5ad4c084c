"""Triton's own formats, shared below the stages: ModelConfig (config.pbtxt) built, printed and parsed."""
