"""The folded Gaussian kernel equals the dense reference (outputs and gradients), declines what
it cannot compute accurately, and is chosen automatically for localness in float32."""

from __future__ import annotations

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import LocalAttention, dispatch
from localnmt.attention.fast import gaussian_fold

C, H, T, B = 32, 4, 11, 3


def make_attention(kind: str, spec: str) -> LocalAttention:
    return testing.make_attention(kind, spec, embed_dim=C, heads=H)


@pytest.fixture
def force_fold():
    with dispatch.forced_kernel("gaussian_fold"):
        yield


def padding(left: bool) -> torch.Tensor:
    return testing.mixed_padding(B, T, 6, "left" if left else "right")


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("spec", ["localness[window=query]", "localness[window=layer,heads=1;3]"])
def test_encoder_fold_equals_reference(force_fold, left, spec):
    att = make_attention("encoder_self", spec)
    mask = padding(left)
    x = torch.randn(T, B, C, requires_grad=True)
    fast, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
    grads_fast = torch.autograd.grad(fast[:, :2].pow(2).sum(), [x, *att.parameters()])
    ref, _ = att(x, x, x, key_padding_mask=mask, need_weights=True)  # dense reference
    grads_ref = torch.autograd.grad(ref[:, :2].pow(2).sum(), [x, *att.parameters()])
    real = ~mask.t()
    torch.testing.assert_close(fast[real], ref[real], atol=1e-5, rtol=1e-4)
    for g_fast, g_ref in zip(grads_fast, grads_ref, strict=True):
        torch.testing.assert_close(g_fast, g_ref, atol=1e-4, rtol=1e-3)
    assert torch.isfinite(fast).all()


def test_decoder_fold_full_and_incremental(force_fold):
    att = make_attention("decoder_self", "localness[window=head]")
    x = torch.randn(T, 2, C)
    future = torch.full((T, T), float("-inf")).triu(1)
    with torch.no_grad():
        fast, _ = att(x, x, x, attn_mask=future, need_weights=False)
        state: dict = {}
        steps = [att(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state,
                     need_weights=False)[0] for t in range(T)]  # fmt: skip
        ref, _ = att(x, x, x, attn_mask=future, need_weights=True)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(torch.cat(steps), ref, atol=1e-5, rtol=1e-4)


def test_cross_fold(force_fold):
    att = make_attention("cross", "localness")
    mem = torch.randn(T, B, C)
    x = torch.randn(5, B, C)
    mask = padding(left=True)
    with torch.no_grad():
        fast, _ = att(x, mem, mem, key_padding_mask=mask, static_kv=True, need_weights=False)
        ref, _ = att(x, mem, mem, key_padding_mask=mask, static_kv=True, need_weights=True)
    torch.testing.assert_close(fast[:, :2], ref[:, :2], atol=1e-5, rtol=1e-4)


def test_declines_low_precision_and_narrow_long_windows():
    att = make_attention("encoder_self", "localness[window=head]")
    loc = att.modifiers[0]
    calls = []
    original = gaussian_fold.fold

    def spy(problem):
        out = original(problem)
        calls.append(out is not None)
        return out

    gaussian_fold.fold = spy
    try:
        x = torch.randn(60, 1, C)
        with torch.no_grad():
            att(x, x, x, need_weights=False)  # D ≈ 25: accepted
            loc.z.fill_(-8.0)  # D = 50·sigmoid(−8) ≈ 0.017 → floor 0.1: declined
            with dispatch.trace() as narrow:
                out, _ = att(x, x, x, need_weights=False)
            ref, _ = att(x, x, x, need_weights=True)
            torch.testing.assert_close(out, ref)  # fell back to an accurate path
            low = att.to(torch.bfloat16)
            with dispatch.trace() as half:
                low(x.bfloat16(), x.bfloat16(), x.bfloat16(), need_weights=False)
    finally:
        gaussian_fold.fold = original
    assert calls == [True, False]  # bf16 declined before folding
    assert "folded terms larger than 4096" in " ".join(narrow.calls[0].declined["gaussian_fold"])
    assert "bfloat16 inputs" in " ".join(half.calls[0].declined["gaussian_fold"])
