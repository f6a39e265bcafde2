"""Shared builders for kernel tests: one pipeline attention from a spec, padding masks, a
counter of calls into a C extension, and an attention dropout that keeps its masks."""

from __future__ import annotations

import torch

from localnmt.attention import AttentionSite, LocalAttention
from localnmt.attention.spec import build_modifiers, parse_spec


def make_attention(kind: str, spec: str, embed_dim: int, heads: int) -> LocalAttention:
    """A one-layer ``LocalAttention`` at site ``kind`` with the modifiers of ``spec`` (eval)."""
    torch.manual_seed(0)
    site = AttentionSite(kind, 0, num_layers=1, embed_dim=embed_dim, num_heads=heads)
    return LocalAttention(
        embed_dim,
        heads,
        site=site,
        modifiers=build_modifiers(parse_spec(spec), site),
        self_attention=kind != "cross",
        encoder_decoder_attention=kind == "cross",
    ).eval()


def padding(batch: int, length: int, real: int, left: bool) -> torch.Tensor:
    """True at padding: sentence 1 has ``real`` tokens (padded on the left or the right),
    sentence 2 is padding only, the others are full."""
    mask = torch.zeros(batch, length, dtype=torch.bool)
    if left:
        mask[1, : length - real] = True
    else:
        mask[1, real:] = True
    mask[2, :] = True
    return mask


class CountCalls:
    """Counts calls into a C extension module by function name (a stand-in around the real
    module: ``monkeypatch.setattr(fast_module, "_ext", CountCalls(fast_module._ext))``)."""

    def __init__(self, module):
        self.module, self.calls = module, {}

    def __getattr__(self, name):
        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return getattr(self.module, name)(*args)

        return call


class RecordingDropout(torch.nn.Module):
    """Attention dropout with a fresh random mask per call, each mask kept for the reference."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.apply_during_inference, self.masks = p, False, []
        self.generator = torch.Generator().manual_seed(7)

    def forward(self, probs):
        keep = torch.rand(probs.shape, generator=self.generator) >= self.p
        self.masks.append(keep)
        return probs * keep / (1 - self.p)
