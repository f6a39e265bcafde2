"""Typed attention records: per-sentence selection and method records kept only when
recording."""

from __future__ import annotations

import pytest
import torch

from localnmt.attention import AttentionSite, LocalAttention
from localnmt.attention.methods import localness
from localnmt.attention.methods.gmm import GaussianMixtureRecord
from localnmt.attention.methods.localness import LocalnessRecord
from localnmt.attention.record import AttentionRecord, tensor_field
from localnmt.attention.spec import build_modifiers, parse_spec

B, H, TQ, TK, K = 2, 3, 4, 5, 2


def _gmm_record() -> AttentionRecord:
    g = torch.Generator().manual_seed(0)
    rand = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    rec = AttentionRecord(probs=rand(B, H, TQ, TK))
    rec.add(
        GaussianMixtureRecord(
            alpha=rand(B, H, TQ, TK),
            beta=rand(B, H, TQ, TK),
            gate=rand(B, H, TQ),
            mu=rand(B, H, TQ, K),
            sigma=rand(B, H, TQ, K),
            omega=rand(B, H, TQ, K).expand(B, H, TQ, K),
        )
    )
    return rec


def test_select_cuts_one_sentence_on_every_axis():
    rec = _gmm_record()
    keys = torch.tensor([False, True, True, False, True])
    one = rec.select(1, slice(0, 3), keys)
    full = rec.get(GaussianMixtureRecord)
    part = one.get(GaussianMixtureRecord)
    assert one.logits is None and one.probs.shape == (H, 3, 3)
    torch.testing.assert_close(one.probs, rec.probs[1, :, :3][:, :, keys])
    torch.testing.assert_close(part.beta, full.beta[1, :, :3][:, :, keys])
    torch.testing.assert_close(part.gate, full.gate[1, :, :3])
    torch.testing.assert_close(part.mu, full.mu[1, :, :3])  # components kept
    assert rec.get(LocalnessRecord) is None


def test_select_keeps_broadcast_axes():
    rec = AttentionRecord(probs=torch.rand(B, 1, TQ, TK))
    one = rec.select(0, torch.tensor([0, 2]), slice(1, None))
    assert one.probs.shape == (1, 2, TK - 1)


def test_method_records_are_detached_and_typed():
    rec = AttentionRecord()
    center = torch.rand(B, H, TQ, requires_grad=True)
    rec.add(LocalnessRecord(center=center * 2, window=center + 1))
    got = rec.get(LocalnessRecord)
    assert not got.center.requires_grad and got.window.shape == (B, H, TQ)


def test_tensor_field_axes_are_checked():
    with pytest.raises(ValueError, match="unknown axes"):
        tensor_field("bhx")


def test_method_record_built_only_when_recording(monkeypatch):
    site = AttentionSite("encoder_self", 0, num_layers=1, embed_dim=16, num_heads=4)
    attn = LocalAttention(
        16, 4, site=site, modifiers=build_modifiers(parse_spec("localness"), site),
        self_attention=True,
    )  # fmt: skip
    x = torch.randn(6, 2, 16)
    made = []
    real = localness.LocalnessRecord
    monkeypatch.setattr(localness, "LocalnessRecord", lambda **kw: made.append(1) or real(**kw))
    attn(x, x, x, need_weights=True)
    assert made == [] and attn.last_record is None
    attn.recording = True
    attn(x, x, x, need_weights=False)
    assert made == [1]
    assert attn.last_record.get(LocalnessRecord).center.shape == (2, 4, 6)
