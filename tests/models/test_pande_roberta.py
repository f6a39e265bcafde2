"""Pande et al. 2021 Table 4: local and tied heads in a RoBERTa (masked-LM) encoder."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.models.roberta import RobertaModel

from localnmt.attention import LocalAttention
from localnmt.fairseq_plugin.roberta_local import PANDE2021_BERT_ARCHS

#: Keep 12 layers × 12 heads; shrink widths (head dim 8).
SMALL = ["--encoder-embed-dim", "96", "--encoder-ffn-embed-dim", "64", "--max-positions", "32"]


def build(arch: str):
    parser = options.get_training_parser()
    ns = options.parse_args_and_arch(parser, ["/nonexistent", "--arch", arch, *SMALL])
    d = Dictionary()
    for i in range(30):
        d.add_symbol(f"w{i}")
    d.add_symbol("<mask>")
    task = SimpleNamespace(source_dictionary=d, max_positions=lambda: 32)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(ns, task), d


@pytest.mark.parametrize("arch", sorted(PANDE2021_BERT_ARCHS))
def test_masked_lm_and_classification_forward_backward(arch):
    model, d = build(arch)
    assert isinstance(model, RobertaModel)
    layers = model.encoder.sentence_encoder.layers
    assert len(layers) == 12 and all(isinstance(lay.self_attn, LocalAttention) for lay in layers)
    tokens = torch.randint(4, len(d) - 1, (2, 10))
    tokens[:, 0] = d.bos()
    tokens[1, -3:] = d.pad()  # right padding, as fairseq's masked_lm batches
    masked = torch.zeros_like(tokens, dtype=torch.bool)
    masked[:, 3] = True
    logits, _ = model(tokens, masked_tokens=masked)
    assert logits.shape == (2, len(d)) and torch.isfinite(logits).all()
    model.register_classification_head("sst2", num_classes=2)
    cls_logits, _ = model(tokens, features_only=True, classification_head_name="sst2")
    assert cls_logits.shape == (2, 2)
    (logits.logsumexp(-1).sum() + cls_logits.sum()).backward()
    first = layers[0].self_attn
    assert first.q_proj.weight.grad is not None and first.q_proj.weight.grad.abs().sum() > 0


def test_table4_tying_layouts():
    expected = {
        "pande2021_bert_band6_alltied": 12,
        "pande2021_bert_band6_132tied": 11,
        "pande2021_bert_band6_120tied": 10,
    }
    for arch, tied_layers in expected.items():
        model, _ = build(arch)
        layers = model.encoder.sentence_encoder.layers
        owner = layers[0].self_attn.q_proj.weight
        tied = [lay.self_attn.q_proj.weight is owner for lay in layers]
        assert tied == [True] * tied_layers + [False] * (12 - tied_layers)
        assert owner.shape[0] == 8  # one head-sized Wq for all tied heads
        for lay in layers[tied_layers:]:
            assert lay.self_attn.q_proj.weight.shape[0] == 96  # untied layers: 12 own heads
        masks = [m.mask_names for m in layers[-1].self_attn.modifiers if m.name == "local_heads"]
        assert masks == [["band6"] * 12]
