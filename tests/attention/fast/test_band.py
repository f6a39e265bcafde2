"""Blocked band kernel == dense reference, outputs (real queries) and gradients.

These tests run the blocked paths (chunked fused op, SDPA over blocks) with the C path of
fast/native/c_band.py switched off; test_band_native.py tests the C path.
"""

from __future__ import annotations

import pytest
import torch
from helpers.attention import (
    assert_layer_kernels_agree,
    assert_same_at_real_queries,
    band_inputs,
    dense_band,
    make_attention,
)
from helpers.attention import stacked_heads as stacked

from localnmt.attention import dispatch, head_area
from localnmt.attention.fast import band
from localnmt.attention.fast.autograd import band_windows
from localnmt.attention.fast.band import MIN_LENGTH, MIN_LENGTH_GROUPED, band_attention
from localnmt.attention.fast.native import c_band as native_band

inputs = band_inputs


@pytest.fixture(autouse=True)
def blocked_paths(monkeypatch):
    """The blocked kernels, not the C path that runs before them where it is built."""
    monkeypatch.setattr(native_band, "ENABLED", False)


@pytest.fixture
def one_sentence_chunks(monkeypatch):
    """The CPU path in chunks of one sentence; yields the list of chunk sizes the fused op
    saw (forward calls), so a test can check the chunked path ran."""
    seen: list[int] = []
    op = band_windows.FLASH_CPU
    if op is None:
        pytest.skip("this torch has no fused CPU attention op with attn_mask: SDPA path only")

    def counting(q, *args, **kwargs):
        seen.append(q.size(0))
        return op(q, *args, **kwargs)

    monkeypatch.setattr(band_windows, "CHUNK_BYTES", 1)
    monkeypatch.setattr(band_windows, "FLASH_CPU", counting)
    return seen


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "left,right,groups,causal",
    [
        ([5] * 4, [5] * 4, 1, False),
        ([1, 40, 0, 3], [2, 0, 40, 3], 1, False),  # per-head bands, wider than a block
        ([5] * 4, [5] * 4, 1, True),
        ([2] * 4, [2] * 4, 3, False),  # 2D: three key groups
    ],
)
def test_equals_dense_outputs_and_gradients(side, left, right, groups, causal):
    q, k, v, pad, kpad = inputs(side, groups=groups)
    lt, rt = torch.tensor(left), torch.tensor(right)
    rt_eff = rt.clamp(max=0) if causal else rt
    got = band_attention(q, k, v, lt, rt_eff, key_padding_mask=kpad, groups=groups, block=8)
    want = dense_band(q, k, v, lt, rt, kpad, groups=groups, causal=causal)
    assert_same_at_real_queries(got, want, pad, (q, k, v))


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "left,right,groups,area",
    [
        ([5] * 4, [5] * 4, 1, None),
        ([5] * 4, [0] * 4, 1, None),  # the causal band the kernel gives decoder self-attention
        ([1, 40, 0, 3], [2, 0, 40, 3], 1, None),  # per-head bands, wider than a block
        ([2] * 4, [2] * 4, 3, None),  # stacked key groups
        ([5] * 4, [5] * 4, 3, 1),  # 2D-CSAN head area
    ],
)
def test_chunked_cpu_path_equals_dense(side, left, right, groups, area, one_sentence_chunks):
    """The CPU path one sentence at a time (windows cut again in backward) == the reference:
    outputs at real queries and gradients."""
    q, k, v, pad, kpad = inputs(side, groups=1 if area else groups)
    lt, rt = torch.tensor(left), torch.tensor(right)
    got = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, groups=groups, block=8,
                         area=area)  # fmt: skip
    ks, vs = (stacked(k, groups), stacked(v, groups)) if area else (k, v)
    want = dense_band(q, ks, vs, lt, rt, pad.repeat(1, groups), groups=groups)
    assert_same_at_real_queries(got, want, pad, (q, k, v))
    assert one_sentence_chunks == [45 // 8 + 1] * 3  # 3 sentences of 6 blocks, one at a time


@pytest.mark.parametrize("area", [None, 1])
def test_chunked_cpu_path_equals_the_sdpa_path(area, one_sentence_chunks, monkeypatch):
    """Both paths run the same fused op: outputs and gradients agree to float32 rounding."""
    q, k, v, pad, kpad = inputs("left")
    lt, rt = torch.tensor([1, 7, 0, 3]), torch.tensor([2, 0, 9, 3])
    got = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, block=8, area=area)
    assert one_sentence_chunks  # the chunked path ran
    monkeypatch.setattr(band_windows, "FLASH_CPU", None)
    want = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, block=8, area=area)
    real = ~pad[:, None, :, None]
    torch.testing.assert_close(got * real, want * real, atol=1e-6, rtol=1e-6)
    weight = torch.randn_like(got) * real
    grads_got = torch.autograd.grad((got * weight).sum(), (q, k, v))
    grads_want = torch.autograd.grad((want * weight).sum(), (q, k, v))
    for a, b in zip(grads_got, grads_want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "spec,kind", [("csan_2d[window=5]", "encoder_self"), ("csan_1d[window=7]", "decoder_self")]
)
def test_layer_band_equals_layer_sdpa(spec, kind):
    """A whole LocalAttention layer at T = MIN_LENGTH + 4 (padding or fairseq's causal mask):
    outputs at real queries and input gradients through the band kernel == the SDPA kernel."""
    assert_layer_kernels_agree(spec, kind, ("band", "sdpa"), MIN_LENGTH + 4)


@pytest.mark.skipif(band_windows.FLASH_CPU is None, reason="no fused CPU attention op in torch")
def test_chunked_cpu_path_only_without_dropout():
    """Dropout goes through F.scaled_dot_product_attention (the fused CPU op has none); so do
    dtypes the op does not take."""
    q = torch.zeros(1, 1, 8, 4)
    assert band_windows.chunked_flash_applies(q, 0.0)
    assert not band_windows.chunked_flash_applies(q, 0.1)
    assert not band_windows.chunked_flash_applies(q.double(), 0.0)


def test_without_the_fused_cpu_op_the_sdpa_path_runs(monkeypatch):
    """A torch without the op (or its attn_mask argument) keeps the SDPA path, same numbers."""
    monkeypatch.setattr(band_windows, "FLASH_CPU", None)
    assert not band_windows.chunked_flash_applies(torch.zeros(1, 1, 8, 4), 0.0)
    q, k, v, pad, kpad = inputs("left")
    lt = rt = torch.full((4,), 5)
    got = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, block=8)
    assert_same_at_real_queries(got, dense_band(q, k, v, lt, rt, kpad), pad, (q, k, v))


def test_padding_only_rows_no_nan():
    q, k, v, pad, _ = inputs("left", t=40)
    pad[1] = True  # a whole row of padding
    out = band_attention(q, k, v, torch.full((4,), 2), torch.full((4,), 2), pad, block=8)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


def test_declines_short_problems_with_a_reason():
    """Not forced, the blocked band kernel declines T < MIN_LENGTH (masked SDPA is as fast
    there) and says so; from MIN_LENGTH on it runs."""
    att = make_attention("encoder_self", "csan_1d[window=3]", embed_dim=16, heads=2, train=True)
    chosen = []
    for t in (MIN_LENGTH // 2, MIN_LENGTH):
        x = torch.randn(t, 1, 16)
        with dispatch.trace() as seen:
            att(x, x, x, need_weights=False)
        (call,) = seen.calls
        chosen.append(call.kernel)
        if call.kernel != "band":
            assert f"T = {t} < {MIN_LENGTH}" in dispatch.joined(call.declined["band"])
    assert chosen == ["sdpa", "band"]


def test_declines_biased_problems_with_a_reason():
    att = make_attention(
        "encoder_self", "csan_1d[window=3] + localness", embed_dim=16, heads=2, train=True
    )
    x = torch.randn(MIN_LENGTH, 1, 16)
    with dispatch.trace(explain=True) as seen:
        att(x, x, x, need_weights=False)
    assert seen.calls[0].declined["band"] == ["a bias"]


def test_csan_2d_takes_the_band_from_its_own_threshold():
    """2D-CSAN through the pipeline: dense below MIN_LENGTH_GROUPED, the band kernel from it
    on (not forced), with the dense path's outputs."""
    att = make_attention("encoder_self", "csan_2d[window=5]", embed_dim=16, heads=4, train=True)
    chosen = []
    for t in (MIN_LENGTH_GROUPED // 2, MIN_LENGTH_GROUPED):
        x = torch.randn(t, 2, 16)
        with dispatch.trace() as seen:
            fast, _ = att(x, x, x, need_weights=False)
        chosen.append(seen.kernels())
        dense, _ = att(x, x, x, need_weights=True)
        torch.testing.assert_close(fast, dense, atol=1e-5, rtol=1e-5)
    assert chosen == [["sdpa"], ["band"]]
    assert MIN_LENGTH_GROUPED < MIN_LENGTH


def test_low_precision():
    q, k, v, pad, _ = inputs("right")
    out = band_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), torch.full((4,), 5),
                         torch.full((4,), 5), pad, block=8)  # fmt: skip
    assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "left,right,heads,area",
    [
        ([5] * 4, [5] * 4, 4, 1),  # 2D-CSAN's default: 3 heads × 11 keys
        ([1, 12, 0, 3], [2, 0, 12, 3], 4, 1),  # per-head bands, wider than a block
        ([2] * 5, [2] * 5, 5, 2),  # area = every head (each seen once), edge heads wrap
    ],
)
def test_head_area_reads_neighbouring_heads_in_place(side, left, right, heads, area):
    """Head-area layout (k, v (B, H, T, d), no stacked copy) == dense softmax over the stacked
    neighbouring heads' windows: outputs at real queries and gradients of q, k, v."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(3, heads, 45, 8, generator=g).requires_grad_() for _ in range(3))
    _, _, _, pad, _ = inputs(side)
    groups = 2 * area + 1
    lt, rt = torch.tensor(left), torch.tensor(right)
    got = band_attention(q, k, v, lt, rt, key_padding_mask=pad, area=area, block=8)
    kpad = pad.repeat(1, groups)
    want = dense_band(q, stacked(k, groups), stacked(v, groups), lt, rt, kpad, groups=groups)
    assert_same_at_real_queries(got, want, pad, (q, k, v))


def test_csan_2d_kernel_takes_the_head_area_path(monkeypatch):
    """Through the pipeline, 2D-CSAN's band kernel gets the unstacked keys (area=1) and never
    builds the stacked keys, forward or backward; the dense path builds them (k and v once
    each) as a view, not three copies. Outputs and gradients agree."""
    att = make_attention("encoder_self", "csan_2d[window=5]", embed_dim=32, heads=4, train=True)
    seen, builds = [], []
    original_band, original_view = band.band_attention, head_area.area_view

    def spy_band(*args, **kwargs):
        seen.append(kwargs.get("area"))
        return original_band(*args, **kwargs)

    def spy_view(*args):
        builds.append(args[0].shape)
        return original_view(*args)

    monkeypatch.setattr(band, "band_attention", spy_band)
    monkeypatch.setattr(head_area, "area_view", spy_view)
    x = torch.randn(40, 2, 32)
    grads = []
    for forced, need_weights in ((True, False), (False, True)):
        xi = x.clone().requires_grad_()
        with dispatch.forced_kernel("band" if forced else None):
            out, _ = att(xi, xi, xi, need_weights=need_weights)
        out.square().sum().backward()
        grads.append((out.detach(), xi.grad))
        assert seen == [1] and len(builds) == (0 if forced else 2)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-5)
    keys = torch.randn(2, 4, 6, 8)
    view = original_view(keys, 3)
    assert view._base is not None and view.untyped_storage().nbytes() == 2 * 6 * 6 * 8 * 4
    torch.testing.assert_close(view, stacked(keys, 3), atol=0, rtol=0)
