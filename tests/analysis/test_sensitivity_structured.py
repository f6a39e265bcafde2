"""Closed-form Jacobian norms of the sensitivity analysis (Pande et al. 2021 §3.1, eq. 5–7)
against autograd's whole Jacobian, and the fallback for layers it does not cover."""

from __future__ import annotations

import pytest
import torch

from localnmt.analysis import sensitivity
from localnmt.attention import LocalAttention
from localnmt.attention.context import AttentionSite
from localnmt.attention.spec import build_modifiers, parse_spec


def _attention(spec: str, dim: int, heads: int, seed: int = 0) -> LocalAttention:
    """An eval-mode encoder self-attention with random weights AND random biases."""
    torch.manual_seed(seed)
    site = AttentionSite("encoder_self", 0, 1, dim, heads)
    mods = build_modifiers(parse_spec(spec), site) if spec else None
    attn = LocalAttention(dim, heads, site=site, modifiers=mods, self_attention=True).eval()
    with torch.no_grad():
        for name, param in attn.named_parameters():
            if name.endswith("bias"):
                param.copy_(0.5 * torch.randn_like(param))  # fairseq initialises them to 0
            else:
                param.mul_(1.5)  # sharper attention maps than at initialisation
    return attn


@pytest.mark.parametrize(
    "spec,heads",
    [
        ("", 1),
        ("", 4),
        ("local_heads[masks=prev1;next1;band2;global]", 4),  # post-softmax, not renormalised
        ("local_heads[heads=2;4,masks=identity;next2]", 4),  # masks on some heads only
        ("local_heads_renorm[masks=prev1;band1;global;next1]", 4),  # masks before softmax
        ("tied_qk[groups=2]", 4),
        ("tied_qk[groups=1] + local_heads[masks=prev1;global;band1;identity]", 4),
    ],
)
@pytest.mark.parametrize("length", [1, 2, 9])
def test_structured_equals_the_whole_jacobian(spec, heads, length):
    attn = _attention(spec, 32, heads, seed=length)
    assert sensitivity.structured_unsupported(attn) is None  # the closed form really runs
    x = torch.randn(length, 1, 32)
    want = sensitivity.jacobian_norms(attn, x, method="reference")
    got = sensitivity.jacobian_norms(attn, x, method="structured")
    assert got.shape == (length, length)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.max()))
    assert (want > 0).any()


def test_structured_chunks_of_one_query_give_the_same_numbers():
    attn = _attention("local_heads[masks=band1;global]", 16, 2)
    x = torch.randn(6, 1, 16)
    whole = sensitivity.jacobian_norms(attn, x, method="structured")
    one_row = sensitivity.jacobian_norms(attn, x, method="structured", memory_mb=0)
    torch.testing.assert_close(one_row, whole, rtol=1e-6, atol=1e-7)


def test_structured_without_query_path():
    """W_q = 0: the logits no longer depend on the queries, the diagonal's query term vanishes
    (R_i W_q = 0) and the closed form still matches autograd. The weights change in place
    after a first call: the cached per-layer Grams must follow."""
    attn = _attention("local_heads[masks=band1;global]", 16, 2)
    x = torch.randn(5, 1, 16)
    before = sensitivity.jacobian_norms(attn, x, method="structured")
    with torch.no_grad():
        attn.q_proj.weight.zero_()
    want = sensitivity.jacobian_norms(attn, x, method="reference")
    got = sensitivity.jacobian_norms(attn, x, method="structured")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, before, rtol=1e-3)


@pytest.mark.parametrize("spec", ["localness", "rel_pos[clip=2]"])
def test_unsupported_modifier_falls_back_to_chunked(spec):
    attn = _attention(spec, 16, 2)
    reason = sensitivity.structured_unsupported(attn)
    assert reason is not None and spec.split("[")[0] in reason
    x = torch.randn(4, 1, 16)
    want = sensitivity.jacobian_norms(attn, x, method="reference")
    got = sensitivity.jacobian_norms(attn, x, method="structured")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_active_dropout_or_bias_kv_is_not_structured():
    attn = LocalAttention(
        16, 2, site=AttentionSite("encoder_self", 0, 1, 16, 2), self_attention=True, dropout=0.1
    )
    assert "dropout" in sensitivity.structured_unsupported(attn.train())
    assert sensitivity.structured_unsupported(attn.eval()) is None
    kv = LocalAttention(
        16,
        2,
        site=AttentionSite("encoder_self", 0, 1, 16, 2),
        self_attention=True,
        add_bias_kv=True,
    ).eval()
    assert "bias_kv" in sensitivity.structured_unsupported(kv)


@pytest.mark.parametrize("spec", ["", "localness"])  # the closed form; the chunked fallback
@pytest.mark.parametrize("method", sensitivity.METHODS)
def test_norms_carry_no_graph_of_the_weights(method, spec):
    """β holds no autograd graph, although the layer's weights require grad: a graph there kept
    every chunk's backward alive (the chunked method grew by one chunk per chunk: 17 GB at
    T = 40 with 512 dims) and would keep every sentence's across a test set."""
    attn = _attention(spec, 16, 2)
    assert all(p.requires_grad for p in attn.parameters())
    beta = sensitivity.jacobian_norms(attn, torch.randn(5, 1, 16), method=method, memory_mb=0)
    assert not beta.requires_grad and beta.grad_fn is None


def test_unknown_method_is_refused():
    attn = _attention("", 8, 2)
    with pytest.raises(ValueError, match="structured"):
        sensitivity.jacobian_norms(attn, torch.randn(2, 1, 8), method="fast")
