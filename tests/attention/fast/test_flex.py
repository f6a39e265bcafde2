"""The FlexAttention kernel equals the dense reference (forward; torch has no FlexAttention
backward on CPU), for windows, padding on either side, the causal triangle, incremental
decoding, stacked key groups and Gaussian biases; it declines what it cannot compute."""

from __future__ import annotations

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import AttentionSite, LocalAttention, dispatch
from localnmt.attention.fast import flex
from localnmt.attention.problem import explain, fast_attention

pytestmark = pytest.mark.skipif(not flex.available(), reason="torch without FlexAttention")

C, H, T, B = 32, 4, 21, 3


def make_attention(kind: str, spec: str) -> LocalAttention:
    return testing.make_attention(kind, spec, embed_dim=C, heads=H)


@pytest.fixture
def force_flex():
    with dispatch.forced_kernel("flex"):
        yield


def padding(left: bool) -> torch.Tensor:
    return testing.mixed_padding(B, T, 8, "left" if left else "right")


ENCODER_SPECS = [
    "csan_1d[window=5]",
    "csan_1d[window=3,heads=1;3] + csan_1d[window=7,heads=2]",  # per-head windows
    "csan_2d[window=3,area_heads=3]",  # three stacked key groups
    "localness[window=query]",  # Gaussian bias only
    "localness[window=head] + csan_1d[window=9]",  # bias and window
]


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("spec", ENCODER_SPECS)
def test_encoder_equals_reference(force_flex, left, spec):
    att = make_attention("encoder_self", spec)
    mask = padding(left)
    x = torch.randn(T, B, C)
    with torch.no_grad():
        fast, _ = att(x, x, x, key_padding_mask=mask, need_weights=False)
        ref, _ = att(x, x, x, key_padding_mask=mask, need_weights=True)  # dense reference
    real = ~mask.t()
    assert real.sum() > 0
    torch.testing.assert_close(fast[real], ref[real], atol=1e-5, rtol=1e-4)
    assert torch.isfinite(fast).all()


DECODER_SPECS = ["csan_1d[window=5]", "localness[window=head] + csan_1d[window=7]"]


@pytest.mark.parametrize("spec", DECODER_SPECS)
def test_decoder_full_and_incremental(force_flex, spec):
    att = make_attention("decoder_self", spec)
    x = torch.randn(T, 2, C)
    future = torch.full((T, T), float("-inf")).triu(1)
    with torch.no_grad():
        fast, _ = att(x, x, x, attn_mask=future, need_weights=False)
        ref, _ = att(x, x, x, attn_mask=future, need_weights=True)
        state: dict = {}
        steps = [
            att(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state,
                need_weights=False)[0]
            for t in range(T)
        ]  # fmt: skip
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(torch.cat(steps), ref, atol=1e-5, rtol=1e-4)


def test_matches_plain_restatement(force_flex):
    """Independent of the pipeline: a band over indices with left padding, written out."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 2, 12, 8) for _ in range(3))
    pad = torch.zeros(2, 12, dtype=torch.bool)
    pad[0, :4] = True
    left, right = torch.tensor([2, 0]), torch.tensor([1, 3])
    mask_mod = flex.make_mask_mod(left, right, ~pad, 12, 0, causal=False)
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    bm = create_block_mask(mask_mod, 2, 2, 12, 12, device="cpu")
    got = flex_attention(q, k, v, block_mask=bm, scale=1.0)
    rel = torch.arange(12)[None, :] - torch.arange(12)[:, None]  # j - i
    want = torch.zeros_like(got)
    for b in range(2):
        for h in range(2):
            allowed = (rel >= -left[h]) & (rel <= right[h]) & ~pad[b][None, :]
            logits = (q[b, h] @ k[b, h].t()).masked_fill(~allowed, float("-inf"))
            want[b, h] = torch.softmax(logits, -1).nan_to_num(0.0) @ v[b, h]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spec", ["csan_1d[window=5]", "csan_2d[window=3,area_heads=3]"])
def test_block_masks_are_shared_across_layers(force_flex, spec):
    flex._block_masks.clear()
    att = make_attention("encoder_self", spec)
    mask = padding(True)
    x = torch.randn(T, B, C)
    with torch.no_grad():
        att(x, x, x, key_padding_mask=mask, need_weights=False)
        att(x, x, x, key_padding_mask=mask, need_weights=False)  # the next layer, same mask
    assert len(flex._block_masks) == 1


@pytest.mark.parametrize("spec", ["csan_1d[window=5]", "csan_2d[window=3,area_heads=3]"])
def test_new_mask_at_the_old_address_gets_its_own_block_mask(force_flex, spec):
    """A new batch's padding mask often reuses the freed memory of the last one (same address,
    shape and version counter): it must not get the last batch's block mask."""
    import numpy as np

    att = make_attention("encoder_self", spec)
    x = torch.randn(T, B, C)
    buffer = padding(True).numpy().copy()
    with torch.no_grad():
        first = torch.from_numpy(buffer)
        att(x, x, x, key_padding_mask=first, need_weights=False)
        np.copyto(buffer, padding(False).numpy())  # the same memory, new content
        second = torch.from_numpy(buffer)
        assert second.data_ptr() == first.data_ptr() and second._version == first._version
        fast, _ = att(x, x, x, key_padding_mask=second, need_weights=False)
        ref, _ = att(x, x, x, key_padding_mask=second, need_weights=True)
    real = ~second.t()
    torch.testing.assert_close(fast[real], ref[real], atol=1e-5, rtol=1e-4)


def test_declines_with_reasons():
    from localnmt.attention.context import BandMask
    from localnmt.attention.problem import AttentionProblem

    q = torch.randn(1, 2, 300, 8)
    site = AttentionSite("encoder_self", 0, 1, 16, 2)
    band = [BandMask(3, 3)]

    def reason(problem: AttentionProblem) -> str:
        return "; ".join(explain(problem)["flex"])

    # on CPU it is never chosen automatically
    assert "CUDA only" in reason(AttentionProblem(site, q, q, q, bands=band))
    with dispatch.forced_kernel("flex"):
        taken = AttentionProblem(site, q, q, q, bands=band)
        assert reason(taken) == "" and fast_attention(taken) is not None
        assert "dropout" in reason(AttentionProblem(site, q, q, q, bands=band, dropout_p=0.1))
        dense = torch.ones(300, 300, dtype=torch.bool)
        assert "dense mask" in reason(AttentionProblem(site, q, q, q, allowed=dense))
        grad_q = q.clone().requires_grad_()
        needs_grad = AttentionProblem(site, grad_q, q, q, bands=band)
        assert "gradients on the CPU" in reason(needs_grad)
        with pytest.raises(dispatch.KernelDeclined, match="gradients on the CPU"):
            fast_attention(needs_grad)  # forced: the error says why
        cross = AttentionSite("cross", 0, 1, 16, 2)
        assert reason(AttentionProblem(cross, q, q, q, bands=band)) == "cross-attention"


def test_every_reason_to_decline_is_kept():
    """Not only the first: a CPU problem with dropout, a dense mask and no window gets all."""
    from localnmt.attention.problem import AttentionProblem

    q = torch.randn(1, 2, 300, 8)
    site = AttentionSite("cross", 0, 1, 16, 2)
    dense = torch.ones(300, 300, dtype=torch.bool)
    problem = AttentionProblem(site, q, q, q, allowed=dense, dropout_p=0.1)
    structural = [
        "a dense mask (SDPA takes it)",
        "attention dropout (FlexAttention has none)",
        "cross-attention",
    ]
    assert explain(problem)["flex"] == [
        "CUDA only unless forced (no backward on CPU; the CPU has band and SDPA)",
        "no window (band) restricts the keys",
        *structural,
    ]
    with dispatch.forced_kernel("flex"), pytest.raises(dispatch.KernelDeclined) as err:
        fast_attention(problem)
    assert err.value.reasons == structural  # forced: the device and window rules are off
