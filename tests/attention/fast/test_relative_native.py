"""The C kernel of relative positions (fast/relative.py, fast/native/c_relative.py,
csrc/relative.c) == Shaw et al.'s eqs. 3-5 re-stated in float64, every build it has: outputs at
real queries and the gradients of q, k, v and both tables; and, in a layer, == the dense
reference path, which it replaces only where it computes the same problem."""

from __future__ import annotations

import pytest
import torch
from helpers.attention import CountCalls, make_attention, mixed_padding

from localnmt.attention import dispatch
from localnmt.attention.fast.native import c_relative

C_EXTENSION = c_relative._relative  # for the ``build`` fixture (conftest.py)
needs_extension = pytest.mark.skipif(
    C_EXTENSION is None, reason="localnmt._relative was not built (no C compiler)"
)


def shaw64(q, k, v, wk, wv, clip, pad=None, causal=False, q_pos=None, k_pos=None):
    """Eqs. 3-5 one query at a time in float64, from the definitions: e_ij = q_i·(k_j +
    w^K[clip(j−i)]), α = softmax over the allowed keys, z_i = Σ_j α_ij (v_j + w^V[clip(j−i)]);
    positions counted from each sentence's first real key (``q_pos``, ``k_pos``: given)."""
    q, k, v, wk, wv = (t.double() for t in (q, k, v, wk, wv))
    bsz, heads, tq, dim = q.shape
    tk = k.size(2)
    out = torch.zeros(bsz, heads, tq, dim, dtype=torch.float64)
    for b in range(bsz):
        for i in range(tq):
            keys = [j for j in range(tk) if (pad is None or not pad[b, j])
                    and (not causal or j <= i + tk - tq)]  # fmt: skip
            if not keys:
                continue
            rows = [int(max(-clip, min(clip, k_pos[b, j] - q_pos[b, i]))) + clip for j in keys]
            for h in range(heads):
                logits = torch.stack(
                    [q[b, h, i] @ (k[b, h, j] + wk[r]) for j, r in zip(keys, rows)]
                )
                alpha = torch.softmax(logits, dim=0)
                out[b, h, i] = sum(a * (v[b, h, j] + wv[r]) for a, j, r in zip(alpha, keys, rows))
    return out


def inputs(tq, tk, side, clip=3, heads=4, dim=20, seed=0):
    """Random q, k, v (as head-split strided views, the layout the adapters hand over), the
    tables, padding and positions counted from each sentence's first real key."""
    gen = torch.Generator().manual_seed(seed)
    bsz = 3
    pad = mixed_padding(bsz, tk, 2, side) if side else None

    def heads_view(t):  # (B, T, H·d) projections split into (B, H, T, d) views
        return torch.randn(bsz, t, heads * dim, generator=gen).view(bsz, t, heads, dim)

    q = heads_view(tq).transpose(1, 2).requires_grad_()
    k, v = (heads_view(tk).transpose(1, 2).requires_grad_() for _ in range(2))
    wk, wv = (torch.randn(2 * clip + 1, dim, generator=gen).requires_grad_() for _ in range(2))
    first = torch.zeros(bsz) if pad is None else pad.long().argmin(dim=1).float()
    k_pos = torch.arange(tk)[None].float() - first[:, None]  # (B, Tk)
    q_pos = torch.arange(tq)[None].float() - (first[:, None] if tq == tk else torch.zeros(bsz, 1))
    buckets = (k_pos[:, None, :] - q_pos[:, :, None]).round().long().clamp(-clip, clip) + clip
    return q, k, v, wk, wv, pad, q_pos, k_pos, buckets.unsqueeze(1)


@pytest.fixture
def c_calls(monkeypatch):
    counter = CountCalls(c_relative._relative)
    monkeypatch.setattr(c_relative, "_relative", counter)
    return counter


@needs_extension
@pytest.mark.parametrize("side", ["left", "right", None])
@pytest.mark.parametrize("tq,tk,causal", [(7, 7, False), (7, 7, True), (5, 9, False)])
@pytest.mark.parametrize("clip", [2, 16])
def test_equals_eqs_3_to_5(side, tq, tk, causal, clip, build, c_calls):
    q, k, v, wk, wv, pad, q_pos, k_pos, buckets = inputs(tq, tk, side, clip)
    out = c_relative.c_relative_attention(q, k, v, wk, wv, buckets, pad, causal)
    want = shaw64(q, k, v, wk, wv, clip, pad, causal, q_pos, k_pos)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    grad_out = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v, wk, wv), grad_out)
    want_grads = torch.autograd.grad(want, (q, k, v, wk, wv), grad_out.double())
    for g, w in zip(got, want_grads, strict=True):
        torch.testing.assert_close(g.double(), w.double(), atol=5e-5, rtol=1e-4)
    assert c_calls.calls == {"forward": 1, "backward": 1}


@needs_extension
@pytest.mark.parametrize("side", ["left", None])
def test_buckets_in_any_order(side, build):
    """Key positions shuffled within each sentence: a row's buckets are no longer sorted by
    key, and the backward's per-bucket sums of dw^K and dw^V must still find them all."""
    clip = 2
    q, k, v, wk, wv, pad, q_pos, _, _ = inputs(6, 8, side, clip)
    gen = torch.Generator().manual_seed(3)
    k_pos = torch.stack([torch.randperm(8, generator=gen).float() for _ in range(q.size(0))])
    buckets = (k_pos[:, None, :] - q_pos[:, :, None]).round().long().clamp(-clip, clip) + clip
    out = c_relative.c_relative_attention(q, k, v, wk, wv, buckets.unsqueeze(1), pad, False)
    want = shaw64(q, k, v, wk, wv, clip, pad, False, q_pos, k_pos)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    grad_out = torch.randn_like(out)
    got = torch.autograd.grad(out, (wk, wv), grad_out)
    want_grads = torch.autograd.grad(want, (wk, wv), grad_out.double())
    for g, w in zip(got, want_grads, strict=True):
        torch.testing.assert_close(g.double(), w.double(), atol=5e-5, rtol=1e-4)


@needs_extension
def test_rows_without_keys_give_zeros_and_no_nan(c_calls):
    """A sentence of padding only (cross-attention to an empty source): output 0, gradients 0."""
    q, k, v, wk, wv, pad, *_, buckets = inputs(4, 6, "right")
    pad = pad.clone()
    pad[1] = True
    out = c_relative.c_relative_attention(q, k, v, wk, wv, buckets, pad, False)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert all(torch.isfinite(g).all() for g in grads)
    assert torch.equal(grads[0][1], torch.zeros_like(grads[0][1]))


@needs_extension
@pytest.mark.parametrize("team", [True, False])
def test_threads_split_sentences_with_the_same_numbers(team, monkeypatch, c_calls):
    """One thread or three, in one call on torch's threads or over a pool of Python threads:
    outputs and the gradients of q, k, v are the same bit for bit; the tables' gradients,
    summed over the threads' shares in any order, to float32 rounding."""
    monkeypatch.setattr(c_relative, "TEAM", team and c_relative.TEAM)
    q, k, v, wk, wv, pad, *_, buckets = inputs(6, 6, "left", seed=3)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            out = c_relative.c_relative_attention(q, k, v, wk, wv, buckets, pad, False)
            results.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v, wk, wv))))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(results[0][:4], results[1][:4], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(results[0][4:], results[1][4:], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@needs_extension
def test_table_gradients_repeat_bit_for_bit_at_a_given_thread_count(c_calls):
    """The threads' shares of dw^K, dw^V are added in the order of their ranks: two runs on
    three threads give the same bits."""
    q, k, v, wk, wv, pad, *_, buckets = inputs(6, 6, "left", seed=4)
    before = torch.get_num_threads()
    runs = []
    try:
        torch.set_num_threads(3)
        for _ in range(2):
            out = c_relative.c_relative_attention(q, k, v, wk, wv, buckets, pad, False)
            runs.append(torch.autograd.grad(out.square().sum(), (wk, wv)))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))


@needs_extension
def test_double_backward_differentiates_in_torch_ops(c_calls):
    q, k, v, wk, wv, pad, q_pos, k_pos, buckets = inputs(5, 5, "right")
    out = c_relative.c_relative_attention(q, k, v, wk, wv, buckets, pad, False)
    (gq,) = torch.autograd.grad(out.square().sum(), q, create_graph=True)
    (ggk,) = torch.autograd.grad(gq.sum(), wk)
    want = shaw64(q, k, v, wk, wv, 3, pad, False, q_pos, k_pos)
    (wq,) = torch.autograd.grad(want.square().sum(), q, create_graph=True)
    (wgk,) = torch.autograd.grad(wq.sum(), wk)
    torch.testing.assert_close(ggk, wgk, atol=1e-4, rtol=1e-4)


def layer_run(site, spec, side, kernel=None, train=True):
    """A layer's output and every gradient, with the kernel ``kernel`` forced (None: the
    automatic choice), and the kernels that ran."""
    torch.manual_seed(0)
    att = make_attention(site, spec, embed_dim=16, heads=4, train=train)
    x = torch.randn(9, 3, 16, requires_grad=True)
    mem = torch.randn(12, 3, 16)
    causal = site == "decoder_self"
    pad = None if causal else mixed_padding(3, 12 if site == "cross" else 9, 2, side)
    future = torch.triu(torch.full((9, 9), float("-inf")), 1) if causal else None
    keys = mem if site == "cross" else x
    with dispatch.forced_kernel(kernel), dispatch.trace() as seen:
        out, _ = att(x, keys, keys, key_padding_mask=pad, attn_mask=future, need_weights=False)
    real = torch.ones(9, 3, dtype=torch.bool) if site != "encoder_self" else ~pad.t()
    grads = torch.autograd.grad((out * real[..., None]).square().sum(), [x, *att.parameters()],
                                allow_unused=True)  # fmt: skip
    return out * real[..., None], grads, seen.kernels()


@needs_extension
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("site", ["encoder_self", "decoder_self", "cross"])
def test_layer_takes_the_c_kernel_with_the_dense_paths_numbers(site, side):
    out, grads, kernels = layer_run(site, "rel_pos[clip=3]", side)
    want, want_grads, dense = layer_run(site, "rel_pos[clip=3]", side, kernel="dense")
    assert kernels == ["relative"] and dense == ["dense"]
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    for g, w in zip(grads, want_grads, strict=True):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g, w, atol=2e-5 * max(w.abs().max().item(), 1.0), rtol=1e-4)


@pytest.mark.parametrize(
    "spec",
    [
        "rel_pos[clip=3] + block[block=3]",  # two value terms
        "rel_pos[clip=3] + local_heads[masks=prev1;next1;band2;global]",  # a post stage
        "rel_pos[clip=3,heads=1-2]",  # a head selection: the bias is dense
    ],
)
def test_other_value_terms_post_stages_and_head_selections_keep_the_dense_path(spec):
    *_, kernels = layer_run("encoder_self", spec, "right")
    assert kernels == ["dense"]


def test_attention_dropout_keeps_the_dense_path_and_the_layers_dropout():
    att = make_attention("encoder_self", "rel_pos[clip=3]", embed_dim=16, heads=4, train=True)
    att.dropout_module.p = 0.3
    x = torch.randn(9, 3, 16)
    with dispatch.trace() as seen:
        att(x, x, x, need_weights=False)
    assert seen.kernels() == ["dense"]


@needs_extension
def test_longer_keys_than_max_keys_take_the_dense_path_unless_forced():
    from localnmt.attention.fast.relative import MAX_KEYS

    att = make_attention("encoder_self", "rel_pos[clip=3]", embed_dim=16, heads=4, train=True)
    x = torch.randn(MAX_KEYS + 1, 2, 16)
    with dispatch.trace() as seen:
        auto, _ = att(x, x, x, need_weights=False)
    (call,) = seen.calls
    assert call.kernel == "dense"
    assert call.declined["relative"] == [f"Tk = {MAX_KEYS + 1} > {MAX_KEYS}, where the dense "
                                         "path's matrix products are faster"]  # fmt: skip
    with dispatch.forced_kernel("relative"), dispatch.trace() as forced:
        out, _ = att(x, x, x, need_weights=False)
    assert forced.kernels() == ["relative"]
    torch.testing.assert_close(out, auto, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("site", ["encoder_self", "cross"])
def test_weights_requested_give_the_same_output_with_the_value_term_once(site):
    """With ``need_weights`` the dense path runs with the problem's relative value term (added
    once, by the problem, not again by the method): the output equals the kernel's."""
    torch.manual_seed(0)
    att = make_attention(site, "rel_pos[clip=3]", embed_dim=16, heads=4, train=False)
    x = torch.randn(7, 3, 16)
    keys = torch.randn(10, 3, 16) if site == "cross" else x
    pad = mixed_padding(3, keys.size(0), 2, "left")
    with torch.no_grad(), dispatch.trace() as seen:
        fast, _ = att(x, keys, keys, key_padding_mask=pad, need_weights=False)
        dense, weights = att(x, keys, keys, key_padding_mask=pad, need_weights=True)
    expected = ["relative" if c_relative.ENABLED else "dense", "dense"]
    assert seen.kernels() == expected and weights is not None
    real = ~pad.t()[..., None] if site == "encoder_self" else torch.ones(7, 3, 1, dtype=torch.bool)
    torch.testing.assert_close(fast * real, dense * real, atol=1e-5, rtol=1e-5)


def test_without_the_extension_the_dense_path_runs_and_says_why(monkeypatch):
    monkeypatch.setattr(c_relative, "ENABLED", False)
    out, grads, kernels = layer_run("encoder_self", "rel_pos[clip=3]", "right")
    want, want_grads, _ = layer_run("encoder_self", "rel_pos[clip=3]", "right", kernel="dense")
    assert kernels == ["dense"]
    assert torch.equal(out, want)
    att = make_attention("encoder_self", "rel_pos[clip=3]", embed_dim=16, heads=4)
    x = torch.randn(5, 2, 16)
    with dispatch.trace() as seen:
        att(x, x, x, need_weights=False)
    assert seen.calls[0].declined["relative"] == ["the C extension localnmt._relative is not built"]
