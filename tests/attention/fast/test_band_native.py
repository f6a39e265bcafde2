"""The C band kernel (fast/native/c_band.py, csrc/band.c) == dense reference, every build it has:
outputs at real queries and gradients of q, k, v; and it really ran."""

from __future__ import annotations

import shutil
import sysconfig

import pytest
import torch
from helpers import attention as testing
from helpers.attention import CountCalls, band_inputs, stacked_heads

from localnmt.attention import dispatch
from localnmt.attention.fast import band
from localnmt.attention.fast.band import band_attention
from localnmt.attention.fast.native import c_band as band_cpu

C_EXTENSION = band_cpu._band  # for the ``build`` fixture (conftest.py)
needs_extension = pytest.mark.skipif(
    C_EXTENSION is None, reason="localnmt._band was not built (no C compiler)"
)


def dense64(q, k, v, *args, **kwargs):
    """``testing.dense_band`` computed in float64 and rounded to float32: the C kernel is
    compared with the exact result, not with float32 GEMMs whose rounding varies from run to
    run with memory alignment (MKL)."""
    return testing.dense_band(q.double(), k.double(), v.double(), *args, **kwargs).float()


def assert_same_at_real_queries(got, want, pad, inputs) -> None:
    """The band check against the float64 reference: outputs at real queries to 1e-5,
    gradients (seeded random weights) to 5e-5: float32 sums in C against exact ones."""
    testing.assert_same_at_real_queries(got, want, pad, inputs, grad_atol=5e-5, grad_rtol=1e-4)


class CallsOf(CountCalls):
    """The C module with its ``forward`` and ``backward`` calls counted."""

    @property
    def forwards(self) -> int:
        return self.calls.get("forward", 0)

    @property
    def backwards(self) -> int:
        return self.calls.get("backward", 0)


@pytest.fixture
def c_calls(monkeypatch):
    counter = CallsOf(band_cpu._band)
    monkeypatch.setattr(band_cpu, "_band", counter)
    monkeypatch.setattr(band_cpu, "ENABLED", True)
    return counter


@needs_extension
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "left,right,causal",
    [
        ([5] * 4, [5] * 4, False),
        ([1, 40, 0, 3], [2, 0, 40, 3], False),  # per-head bands, one wider than the sentence
        ([5] * 4, [5] * 4, True),  # the causal band of decoder self-attention
        ([-2, 3, 0, 60], [4, -1, 0, 60], False),  # windows beside the query; the whole sentence
    ],
)
def test_1d_equals_dense(side, left, right, causal, build, c_calls):
    q, k, v, pad, kpad = band_inputs(side)
    lt, rt = torch.tensor(left), torch.tensor(right)
    rt_eff = rt.clamp(max=0) if causal else rt
    got = band_attention(q, k, v, lt, rt_eff, key_padding_mask=kpad)
    want = dense64(q, k, v, lt, rt, kpad, causal=causal)
    assert_same_at_real_queries(got, want, pad, (q, k, v))
    assert c_calls.forwards >= 1 and c_calls.backwards >= 1


@needs_extension
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "left,right,heads,area",
    [
        ([5] * 4, [5] * 4, 4, 1),  # 2D-CSAN's default: 3 heads × 11 keys
        ([1, 12, 0, 3], [2, 0, 12, 3], 4, 1),  # per-head bands
        ([2] * 5, [2] * 5, 5, 2),  # area = every head (each seen once), edge heads wrap
    ],
)
def test_head_area_equals_dense(side, left, right, heads, area, build, c_calls):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(3, heads, 45, 8, generator=g).requires_grad_() for _ in range(3))
    _, _, _, pad, _ = band_inputs(side)
    groups = 2 * area + 1
    lt, rt = torch.tensor(left), torch.tensor(right)
    kpad = pad.repeat(1, groups)  # the pipeline's mask over the stacked groups
    got = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, area=area)
    ks, vs = stacked_heads(k, groups), stacked_heads(v, groups)
    want = dense64(q, ks, vs, lt, rt, kpad, groups=groups)
    assert_same_at_real_queries(got, want, pad, (q, k, v))
    assert c_calls.forwards >= 1 and c_calls.backwards >= 1


@needs_extension
def test_head_area_of_one_head_is_1d(c_calls):
    """2D-CSAN with area_heads=1 hands the band kernel area 0: the 1D layout."""
    q, k, v, pad, kpad = band_inputs("left")
    lt = rt = torch.full((4,), 5)
    got = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, area=0)
    want = dense64(q, k, v, lt, rt, kpad)
    assert_same_at_real_queries(got, want, pad, (q, k, v))
    assert c_calls.forwards == 1


@needs_extension
def test_head_dim_not_a_multiple_of_16(build, c_calls):
    """The dot products run 16 lanes at a time and the rest one by one (d = 8 above, 21 here)."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 30, 21, generator=g).requires_grad_() for _ in range(3))
    pad = torch.zeros(2, 30, dtype=torch.bool)
    pad[1, :9] = True
    lt = rt = torch.tensor([3, 3, 3])
    got = band_attention(q, k, v, lt, rt, key_padding_mask=pad, area=1)
    want = dense64(q, stacked_heads(k, 3), stacked_heads(v, 3), lt, rt, pad.repeat(1, 3),
                   groups=3)  # fmt: skip
    assert_same_at_real_queries(got, want, pad, (q, k, v))


@needs_extension
def test_threads_split_sentences_with_the_same_numbers(c_calls):
    """Sentences are split among torch's threads (inside one call where the extension was
    built with OpenMP); the result is the same bit for bit."""
    q, k, v, pad, kpad = band_inputs("left")
    lt = rt = torch.full((4,), 5)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            out = band_attention(q, k, v, lt, rt, key_padding_mask=kpad, area=1)
            results.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v))))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
    assert c_calls.forwards == 1 + (1 if band_cpu.TEAM else 3)


@needs_extension
def test_forked_child_gets_its_own_thread_pool(c_calls):
    """A pool made before fork has no threads in the child: the child must make its own. Built
    with OpenMP, the kernel runs on torch's threads, which cannot run in parallel in a child
    forked after they did (torch's own ops hang there too): such a child runs one thread, as
    torch's data-loader workers do, and must compute the same."""
    child_threads = 1 if band_cpu.TEAM else 3
    import multiprocessing

    q, k, v, pad, kpad = band_inputs("left")
    lt = rt = torch.full((4,), 5)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with torch.no_grad():
            want = band_attention(q, k, v, lt, rt, key_padding_mask=kpad)  # the parent's pool
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(1) as pool:
            args = (q.detach(), k.detach(), v.detach(), kpad, child_threads)
            got = pool.apply_async(_band_in_child, args)
            got = got.get(timeout=60)  # a reused parent pool would never run the work
    finally:
        torch.set_num_threads(before)
    assert torch.equal(got, want)


def _band_in_child(q, k, v, kpad, threads):
    torch.set_num_threads(threads)
    lt = rt = torch.full((4,), 5)
    with torch.no_grad():
        return band_attention(q, k, v, lt, rt, key_padding_mask=kpad)


@needs_extension
def test_sentence_of_padding_only_gives_zeros(c_calls):
    q, k, v, pad, kpad = band_inputs("right")
    kpad = kpad.clone()
    kpad[1] = True
    lt = rt = torch.full((4,), 5)
    out = band_attention(q, k, v, lt, rt, key_padding_mask=kpad)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    assert all(torch.isfinite(g).all() for g in grads)
    assert torch.equal(grads[0][1], torch.zeros_like(grads[0][1]))


@needs_extension
def test_declines_what_it_does_not_compute(c_calls):
    """Dropout, float64 and stacked key groups (head selection) take the blocked kernels."""
    q, k, v, pad, kpad = band_inputs("left")
    lt = rt = torch.full((4,), 5)
    band_attention(q, k, v, lt, rt, key_padding_mask=kpad, dropout_p=0.1)
    band_attention(q.double(), k.double(), v.double(), lt, rt, key_padding_mask=kpad)
    q3, k3, v3, _, kpad3 = band_inputs("left", groups=3)
    band_attention(q3, k3, v3, lt, rt, key_padding_mask=kpad3, groups=3)
    assert c_calls.forwards == 0


@needs_extension
@pytest.mark.parametrize(
    "spec,kind", [("csan_2d[window=5]", "encoder_self"), ("csan_1d[window=7]", "decoder_self")]
)
def test_layer_through_the_c_kernel_equals_sdpa(spec, kind, c_calls):
    """A whole LocalAttention layer (padding, or fairseq's causal mask) through the band kernel,
    which runs the C path, == the SDPA kernel: outputs at real queries and input gradients."""
    testing.assert_layer_kernels_agree(spec, kind, ("band", "sdpa"), band.MIN_LENGTH + 4)
    assert c_calls.forwards == 1 and c_calls.backwards == 1


def test_extension_is_built_where_a_compiler_is():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler})")
    assert band_cpu._band is not None and band_cpu.ENABLED


@needs_extension
@pytest.mark.parametrize(
    "spec,kind", [("csan_1d[window=5]", "encoder_self"), ("csan_1d[window=5]", "decoder_self"),
                  ("csan_2d[window=5]", "encoder_self")]
)  # fmt: skip
def test_short_sentences_take_the_c_kernel(spec, kind, c_calls):
    """No length threshold on the C path (the blocked kernels start at MIN_LENGTH): a layer at
    T = 12 runs it, with the dense path's outputs at real queries."""
    att = testing.make_attention(kind, spec, embed_dim=16, heads=4, self_attention=True,
                                 train=True)  # fmt: skip
    t = 12
    x = torch.randn(t, 2, 16)
    pad, mask = torch.zeros(2, t, dtype=torch.bool), None
    if kind == "decoder_self":
        pad, mask = None, torch.triu(torch.full((t, t), float("-inf")), 1)
    else:
        pad[1, :5] = True
    with torch.no_grad():
        fast, _ = att(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=False)
        dense, _ = att(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=True)
    real = torch.ones(t, 2, 1) if pad is None else (~pad).T[..., None].float()
    torch.testing.assert_close(fast * real, dense * real, atol=1e-5, rtol=1e-5)
    assert c_calls.forwards == 1


@needs_extension
@pytest.mark.parametrize("area", [None, 1])
def test_vmapped_backward_falls_back_to_torch_ops(area, c_calls):
    """``jacobian(vectorize=True)`` runs the backward under vmap: its batched gradient has no
    memory to hand to C, so backward differentiates the same attention in torch ops."""
    q, k, v, pad, kpad = band_inputs("left", t=9)
    q, k, v = (x.detach()[:1, :, :, :4] for x in (q, k, v))
    kpad = kpad[:1]
    lt, rt = torch.tensor([2, 1, 0, 3]), torch.tensor([1, 2, 3, 0])
    groups = 1 if area is None else 3

    def fast(q, k, v):
        return band_attention(q, k, v, lt, rt, key_padding_mask=kpad.repeat(1, groups), area=area)

    def dense(q, k, v):
        ks = k if area is None else stacked_heads(k, groups)
        vs = v if area is None else stacked_heads(v, groups)
        return dense64(q, ks, vs, lt, rt, kpad.repeat(1, groups), groups=groups)

    got = torch.autograd.functional.jacobian(fast, (q, k, v), vectorize=True)
    want = torch.autograd.functional.jacobian(dense, (q, k, v), vectorize=True)
    real = ~kpad[0]  # padded queries' outputs are the kernel's own
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a[:, :, real], b[:, :, real], atol=1e-5, rtol=1e-5)
    assert c_calls.forwards >= 1 and c_calls.backwards == 0


@needs_extension
def test_double_backward_differentiates_in_torch_ops(c_calls):
    """``create_graph=True``: the C backward writes through addresses autograd cannot see, so
    backward runs in torch ops and the gradient can be differentiated again."""
    q, k, v, pad, kpad = band_inputs("left")
    lt, rt = torch.full((4,), 2), torch.full((4,), 45)  # left padding: every query has a key
    real = (~pad)[:, None, :, None]

    def second_order(attend):
        out = attend(q, k, v) * real
        (gq,) = torch.autograd.grad(out.square().sum(), q, create_graph=True)
        return torch.autograd.grad(gq.square().sum(), (q, k, v))

    def plain(q, k, v):  # every row has a key: a masked softmax without empty-row care
        rel = torch.arange(45)[None, :] - torch.arange(45)[:, None]
        allowed = (rel >= -2) & (rel <= 45) & ~kpad[:, None, None, :]
        logits = (q @ k.transpose(-1, -2)).masked_fill(~allowed, float("-inf"))
        return torch.softmax(logits, -1) @ v

    got = second_order(lambda q, k, v: band_attention(q, k, v, lt, rt, key_padding_mask=kpad))
    want = second_order(plain)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-4)
    # the C forward ran; its backward only where no graph was asked for (the second grad
    # passes back through the first one's use of the output)
    assert c_calls.forwards == 1 and c_calls.backwards == 1


def head_split(bsz: int, heads: int, t: int, dim: int, seed: int) -> tuple:
    """q, k, v as the pipeline has them: strided head-split views ``(B, H, T, d)`` of
    ``(T, B, H·d)`` projections (the bases, leaves that require grad, returned too)."""
    g = torch.Generator().manual_seed(seed)
    bases = [torch.randn(t, bsz, heads * dim, generator=g).requires_grad_() for _ in range(3)]
    views = [x.view(t, bsz, heads, dim).permute(1, 2, 0, 3) for x in bases]
    return views, bases


def autograd_node(out, name: str):
    """The first node called ``name`` in the graph behind ``out`` (breadth first)."""
    queue = [out.grad_fn]
    while queue:
        node = queue.pop(0)
        if node is None:
            continue
        if node.name() == name:
            return node
        queue.extend(fn for fn, _ in node.next_functions)
    raise AssertionError(f"no {name} node")


def test_backward_keeps_contiguous_copies_not_the_strided_inputs(c_calls):
    """What backward keeps are the contiguous copies the kernel reads, made under autograd:
    not the strided inputs as well (their projections' storage, a third copy of q, k, v
    alive in backward), and a double backward still reaches the projections."""
    (q, k, v), bases = head_split(2, 4, 45, 8, seed=5)
    lt, rt = torch.full((4,), 2), torch.full((4,), 3)
    pad = torch.zeros(2, 45, dtype=torch.bool)
    out = band_attention(q, k, v, lt, rt)
    saved = autograd_node(out, "_CBandBackward").saved_tensors
    assert len(saved) == 3 and all(t.is_contiguous() for t in saved)
    kept = {t.untyped_storage().data_ptr() for t in saved}
    assert kept.isdisjoint(x.untyped_storage().data_ptr() for x in bases)
    want = dense64(q, k, v, lt, rt, pad)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    (gq,) = torch.autograd.grad(out.square().sum(), bases[0], create_graph=True)
    (gq_want,) = torch.autograd.grad(want.square().sum(), bases[0], create_graph=True)
    torch.testing.assert_close(gq, gq_want, atol=5e-5, rtol=1e-4)
    (second,) = torch.autograd.grad(gq.square().sum(), bases[1])
    (second_want,) = torch.autograd.grad(gq_want.square().sum(), bases[1])
    torch.testing.assert_close(second, second_want, atol=1e-3, rtol=1e-3)
    assert c_calls.forwards == 1


@needs_extension
def test_one_band_for_every_head_broadcasts(c_calls):
    """A (1,) band is every head's, as in the blocked kernels; reaches beyond T are T."""
    q, k, v, pad, kpad = band_inputs("right")
    got = band_attention(q, k, v, torch.tensor([2]), torch.tensor([1 << 40]), key_padding_mask=kpad)
    want = dense64(q, k, v, torch.full((4,), 2), torch.full((4,), 45), kpad)
    assert_same_at_real_queries(got, want, pad, (q, k, v))
    assert c_calls.forwards == 1


@needs_extension
def test_wide_bands_keep_the_length_rules(c_calls):
    """Windows wider than C_WINDOW keys (bi_direct's half sentence, a head without a window)
    are not taken below the blocked kernels' threshold: the C kernel's cost grows with them."""
    taken = []
    for window in (band.C_WINDOW - 1, band.C_WINDOW + 1):  # odd windows either side
        spec = f"csan_1d[window={window}]"
        att = testing.make_attention("encoder_self", spec, embed_dim=16, heads=4, train=True)
        x = torch.randn(band.MIN_LENGTH // 2, 2, 16)
        before = c_calls.forwards
        with torch.no_grad(), dispatch.trace() as seen:
            att(x, x, x, need_weights=False)
        taken.append(c_calls.forwards > before)
    assert taken == [True, False]
    (call,) = seen.calls  # the wide window: declined, and the reason names the C kernel's limit
    why = dispatch.joined(call.declined["band"])
    assert f"window of {band.C_WINDOW + 1} keys > {band.C_WINDOW}" in why
