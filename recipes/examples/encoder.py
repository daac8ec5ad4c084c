"""A seeded text encoder (token ids → unit-norm 16-d embedding), exported to ONNX by tritonbuild."""

import torch


class Encoder(torch.nn.Module):
    def __init__(self, vocab: int = 1000, width: int = 32, out: int = 16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.proj = torch.nn.Linear(width, out)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pooled = self.embed(ids).mean(dim=1)
        return torch.nn.functional.normalize(torch.tanh(self.proj(pooled)), dim=-1)


def build_model() -> torch.nn.Module:
    return Encoder()
