"""The pipeline with no modifier equals fairseq's MultiheadAttention; stages plumb correctly."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from fairseq.modules import MultiheadAttention

from localnmt.attention import (
    AffinePost,
    AttentionModifier,
    AttentionSite,
    BandMask,
    LocalAttention,
    QuadraticBias,
    dispatch,
    option,
    register_modifier,
)
from localnmt.attention.spec import build_modifiers, parse_spec

E, H, B = 16, 4, 3
SITES = ["encoder_self", "decoder_self", "cross"]


def make_pair(kind: str, modifiers=None, dropout=0.0):
    self_attn = kind != "cross"
    torch.manual_seed(0)
    ref = MultiheadAttention(
        E, H, dropout=dropout, self_attention=self_attn, encoder_decoder_attention=not self_attn
    )
    site = AttentionSite(kind, 0, 1, E, H)
    ours = LocalAttention(
        E,
        H,
        site=site,
        modifiers=modifiers,
        dropout=dropout,
        self_attention=self_attn,
        encoder_decoder_attention=not self_attn,
    )
    missing = ours.load_state_dict(ref.state_dict(), strict=False)
    assert not missing.unexpected_keys
    return ref, ours


def padding(lengths: list[int], total: int, side: str) -> torch.Tensor:
    mask = torch.ones(len(lengths), total, dtype=torch.bool)
    for i, n in enumerate(lengths):
        if side == "left":
            mask[i, total - n :] = False
        else:
            mask[i, :n] = False
    return mask


def inputs(kind: str, side: str, tq: int = 7, tk: int = 9):
    torch.manual_seed(1)
    x = torch.randn(tq, B, E)
    if kind == "cross":
        src = torch.randn(tk, B, E)
        return x, src, padding([tk, tk - 3, 2], tk, side), None
    if kind == "encoder_self":
        return x, x, padding([tq, tq - 2, 3], tq, side), None
    future = torch.triu(torch.full((tq, tq), float("-inf")), 1)
    return x, x, None, future


def test_parameter_names_and_shapes_match_fairseq():
    ref, ours = make_pair("encoder_self")
    assert {k: v.shape for k, v in ref.state_dict().items()} == {
        k: v.shape for k, v in ours.state_dict().items()
    }


@pytest.mark.parametrize("kind", SITES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("weights", ["none", "mean", "heads"])
@pytest.mark.parametrize("train", [False, True])
def test_equals_fairseq(kind, side, weights, train):
    ref, ours = make_pair(kind)
    ref.train(train)
    ours.train(train)
    x, kv, pad, mask = inputs(kind, side)
    kwargs = dict(
        key_padding_mask=pad,
        attn_mask=mask,
        need_weights=weights != "none",
        need_head_weights=weights == "heads",
    )
    if weights == "heads":
        # fairseq's fused path ignores need_head_weights (returns the head mean); its own
        # unfused path, which this flag selects without changing numbers, returns per head
        ref.skip_embed_dim_check = True
    out_ref, w_ref = ref(x, kv, kv, **kwargs)
    out, w = ours(x, kv, kv, **kwargs)
    torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=0)
    if weights == "none":
        assert w is None
    else:
        assert w.shape == w_ref.shape
        torch.testing.assert_close(w, w_ref, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", ["decoder_self", "cross"])
def test_incremental_equals_fairseq_and_full(kind):
    ref, ours = make_pair(kind)
    ref.eval()
    ours.eval()
    x, kv, pad, mask = inputs(kind, "left")
    full, _ = ours(x, kv, kv, key_padding_mask=pad, attn_mask=mask, need_weights=False)
    state_ref: dict = {}
    state: dict = {}
    for t in range(x.size(0)):
        step = x[t : t + 1]
        key = step if kind == "decoder_self" else kv
        o_ref, _ = ref(step, key, key, key_padding_mask=pad, incremental_state=state_ref,
                       static_kv=kind == "cross", need_weights=False)  # fmt: skip
        o, _ = ours(step, key, key, key_padding_mask=pad, incremental_state=state,
                    static_kv=kind == "cross", need_weights=False)  # fmt: skip
        torch.testing.assert_close(o, o_ref, atol=1e-6, rtol=0)
        torch.testing.assert_close(o[0], full[t], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["decoder_self", "cross"])
def test_reorder_incremental_state_follows_hypotheses(kind):
    """After a beam reorder, each hypothesis continues from the state of its parent."""
    _, ours = make_pair(kind)
    ours.eval()
    x, kv, pad, _ = inputs(kind, "right")
    if kind == "cross":  # beam search reorders hypotheses of one sentence: one shared source
        kv = kv[:, :1].expand_as(kv)
        pad = None if pad is None else pad[:1].expand_as(pad)
    order = torch.tensor([2, 0, 0])
    state: dict = {}
    key = x[:1] if kind == "decoder_self" else kv
    ours(x[:1], key, key, key_padding_mask=pad, incremental_state=state, static_kv=kind == "cross")
    ours.reorder_incremental_state(state, order)
    step = x[1:2, order]  # the next input belongs to the reordered hypotheses
    key2 = step if kind == "decoder_self" else kv
    out, _ = ours(step, key2, key2, key_padding_mask=None if kind == "decoder_self" else pad[order],
                  incremental_state=state, static_kv=kind == "cross")  # fmt: skip
    # the same computation with the batch reordered from the start
    state2: dict = {}
    xr = x[:, order]
    kvr = kv[:, order]
    key = xr[:1] if kind == "decoder_self" else kvr
    padr = None if pad is None else pad[order]
    ours(xr[:1], key, key, key_padding_mask=padr, incremental_state=state2,
         static_kv=kind == "cross")  # fmt: skip
    key2 = xr[1:2] if kind == "decoder_self" else kvr
    expected, _ = ours(xr[1:2], key2, key2, key_padding_mask=padr, incremental_state=state2,
                       static_kv=kind == "cross")  # fmt: skip
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


# ---- stage plumbing, with small modifiers defined here ------------------------------------


@register_modifier
class _ProbeBias(AttentionModifier):
    """A dense bias = −|j − i| · scale (a re-statement is trivial, so the plumbing is tested)."""

    name = "_probe_bias"

    @dataclass
    class Options:
        scale: float = option(0.5)

    def bias(self, ctx):
        rel = ctx.key_positions[:, None, None, :] - ctx.query_positions[:, None, :, None]
        return -rel.abs() * self.options.scale


@register_modifier
class _ProbeQuadratic(AttentionModifier):
    """A Gaussian centred at the query position with σ = 2, as a QuadraticBias."""

    name = "_probe_quadratic"

    def bias(self, ctx):
        p = ctx.query_positions[:, None, :].expand(-1, ctx.num_heads, -1)
        sigma2 = 4.0
        return QuadraticBias(a=torch.full_like(p, -1 / (2 * sigma2)), b=p / sigma2)


@register_modifier
class _ProbeBand(AttentionModifier):
    name = "_probe_band"

    @dataclass
    class Options:
        width: int = option(1)

    def restrict(self, ctx):
        return BandMask(self.options.width, self.options.width)


@register_modifier
class _ProbePost(AttentionModifier):
    name = "_probe_post"

    def post(self, ctx, probs):
        return probs * 0.5


@register_modifier
class _ProbeAffine(AttentionModifier):
    """``p ↦ keep·p + add`` with a learned, query-dependent ``keep`` (a sigmoid of the query)
    and a fixed ``add`` (a distance pattern over real keys), offered to the pipeline as an
    :class:`AffinePost` too; ``drop``: ``keep = 0`` (the dot-product part dropped)."""

    name = "_probe_affine"

    @dataclass
    class Options:
        drop: int = option(0)

    calls = 0  # post_affine calls (class-wide, reset by the tests)

    def _parts(self, ctx):
        keep = 0.0 if self.options.drop else torch.sigmoid(ctx.q.sum(-1, keepdim=True))
        rel = ctx.key_positions[:, None, None, :] - ctx.query_positions[:, None, :, None]
        add = 0.3 / (1.0 + rel.abs().float())
        if ctx.key_padding_mask is not None:
            add = add.masked_fill(ctx.key_padding_mask[:, None, None, :].bool(), 0.0)
        return keep, add.expand(*ctx.q.shape[:3], -1)

    def post(self, ctx, probs):
        keep, add = self._parts(ctx)
        return keep * probs + add

    def post_affine(self, ctx):
        type(self).calls += 1
        return AffinePost(*self._parts(ctx))


def _site_attention(spec: str, kind: str = "encoder_self") -> LocalAttention:
    site = AttentionSite(kind, 0, 1, E, H)
    mods = build_modifiers(parse_spec(spec), site)
    _, ours = make_pair(kind, modifiers=mods)
    return ours.eval()


def _reference(ours: LocalAttention, x, pad, bias_fn=None, allow_fn=None, post_fn=None):
    """Plain attention written out: logits + bias, masked, softmax, post, @v, out_proj."""
    T = x.size(0)
    q = ours.q_proj(x) * ours.scaling
    k, v = ours.k_proj(x), ours.v_proj(x)
    split = lambda t: t.view(T, B, H, -1).permute(1, 2, 0, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    logits = q @ k.transpose(-1, -2)
    real = ~pad
    pos = (real.cumsum(1) - 1).clamp(min=0).float()
    if bias_fn is not None:
        logits = logits + bias_fn(pos)
    allowed = real[:, None, None, :].expand(B, H, T, T)
    if allow_fn is not None:
        allowed = allowed & allow_fn(pos)
    logits = logits.masked_fill(~allowed, -1e30)
    p = torch.softmax(logits, -1)
    if post_fn is not None:
        p = post_fn(p)
    out = (p @ v).permute(2, 0, 1, 3).reshape(T, B, E)
    return ours.out_proj(out), p


def _rel(pos):
    return pos[:, None, None, :] - pos[:, None, :, None]


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_bias_stage_against_reference(side, need_weights):
    ours = _site_attention("_probe_bias[scale=0.7]")
    x, _, pad, _ = inputs("encoder_self", side)
    out, _ = ours(x, x, x, key_padding_mask=pad, need_weights=need_weights)
    ref, _ = _reference(ours, x, pad, bias_fn=lambda pos: -_rel(pos).abs() * 0.7)
    real = ~pad.t()
    torch.testing.assert_close(out[real], ref[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_quadratic_bias_equals_gaussian(side):
    ours = _site_attention("_probe_quadratic")
    x, _, pad, _ = inputs("encoder_self", side)
    out, w = ours(x, x, x, key_padding_mask=pad, need_head_weights=True)
    ref, p = _reference(ours, x, pad, bias_fn=lambda pos: -(_rel(pos) ** 2) / 8.0)
    real = ~pad.t()
    torch.testing.assert_close(out[real], ref[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_band_restriction_and_heads_option(side):
    ours = _site_attention("_probe_band[width=1,heads=2-3]")
    x, _, pad, _ = inputs("encoder_self", side)
    out, w = ours(x, x, x, key_padding_mask=pad, need_head_weights=True)
    head_sel = torch.tensor([False, True, True, False]).view(1, H, 1, 1)
    ref, p = _reference(ours, x, pad, allow_fn=lambda pos: (_rel(pos).abs() <= 1) | ~head_sel)
    real = ~pad.t()
    torch.testing.assert_close(out[real], ref[real], atol=1e-5, rtol=0)
    # weights outside the band are exactly zero on the selected heads only
    far = (_rel(((~pad).cumsum(1) - 1).clamp(min=0).float()).abs() > 1).expand(B, H, -1, -1)
    w = w.transpose(0, 1)  # (B, H, T, T)
    real_q = (~pad)[:, None, :, None]
    assert (w[:, 1:3][(far[:, 1:3] & real_q)] == 0).all()
    assert (w[:, [0, 3]][(far[:, [0, 3]] & real_q & (~pad)[:, None, None, :])] > 0).all()


def test_post_stage_is_not_renormalised():
    ours = _site_attention("_probe_post")
    x, _, pad, _ = inputs("encoder_self", "left")
    out, w = ours(x, x, x, key_padding_mask=pad, need_head_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.full_like(w.sum(-1), 0.5))
    ref, _ = _reference(ours, x, pad, post_fn=lambda p: p * 0.5)
    real = ~pad.t()
    torch.testing.assert_close(out[real], ref[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("spec", ["_probe_bias", "_probe_quadratic", "_probe_band[width=2]",
                                  "_probe_bias + _probe_band[width=1,heads=1]"])  # fmt: skip
@pytest.mark.parametrize("side", ["left", "right"])
def test_fast_path_equals_dense_path(spec, side):
    """need_weights=False takes the kernels; need_weights=True the dense reference."""
    ours = _site_attention(spec)
    x, _, pad, _ = inputs("encoder_self", side)
    fast, _ = ours(x, x, x, key_padding_mask=pad, need_weights=False)
    dense, _ = ours(x, x, x, key_padding_mask=pad, need_weights=True)
    real = ~pad.t()
    torch.testing.assert_close(fast[real], dense[real], atol=1e-5, rtol=0)
    assert torch.isfinite(fast).all()


def test_window_of_only_padding_gives_no_nan():
    ours = _site_attention("_probe_band[width=0]")
    x, _, _, _ = inputs("encoder_self", "left")
    pad = padding([7, 2, 1], 7, "left")
    for need in (False, True):
        out, _ = ours(x, x, x, key_padding_mask=pad, need_weights=need)
        assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in ours.parameters() if p.grad is not None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("spec", ["", "_probe_bias + _probe_band[width=1]", "_probe_quadratic"])
def test_half_precision_no_nan(dtype, spec):
    ours = _site_attention(spec).to(dtype)
    x, _, pad, _ = inputs("encoder_self", "left")
    x = x.to(dtype)
    for need in (False, True):
        try:
            out, _ = ours(x, x, x, key_padding_mask=pad, need_weights=need)
        except RuntimeError as err:  # some CPU builds lack fp16 matmul
            pytest.skip(f"{dtype} unsupported here: {err}")
        assert out.dtype == dtype
        assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("side", ["left", "right"])
def test_recording_keeps_typed_intermediates(side):
    ours = _site_attention("_probe_bias + _probe_post")
    ours.recording = True
    x, _, pad, _ = inputs("encoder_self", side)
    ours(x, x, x, key_padding_mask=pad, need_weights=False)
    rec = ours.last_record
    T = x.size(0)
    assert rec.logits.shape == rec.probs_before_post.shape == rec.probs.shape == (B, H, T, T)
    assert not rec.logits.requires_grad and rec.methods == []
    _, p_ref = _reference(ours, x, pad, bias_fn=lambda pos: -_rel(pos).abs() * 0.5)
    with torch.no_grad():
        real = ~pad[:, None, :, None].expand(B, H, T, T)  # real queries
        torch.testing.assert_close(rec.probs_before_post[real], p_ref[real], atol=1e-6, rtol=0)
        torch.testing.assert_close(rec.probs, rec.probs_before_post * 0.5)  # the post stage
        torch.testing.assert_close(torch.softmax(rec.logits, -1), rec.probs_before_post)


def test_without_post_stage_both_probabilities_are_one_tensor():
    ours = _site_attention("_probe_bias")
    ours.recording = True
    x, _, pad, _ = inputs("encoder_self", "left")
    ours(x, x, x, key_padding_mask=pad, need_weights=False)
    assert ours.last_record.probs is ours.last_record.probs_before_post


def test_recording_off_builds_no_record(monkeypatch):
    from localnmt.attention import pipeline

    def no_record():
        raise AssertionError("a record was built while not recording")

    monkeypatch.setattr(pipeline, "AttentionRecord", no_record)
    ours = _site_attention("_probe_bias + _probe_post")
    x, _, pad, _ = inputs("encoder_self", "left")
    ours(x, x, x, key_padding_mask=pad, need_weights=True)
    assert ours.last_record is None


def test_forced_kernel_declining_raises_and_says_why():
    ours = _site_attention("_probe_quadratic").to(torch.bfloat16)
    x, _, pad, _ = inputs("encoder_self", "left")
    why = "kernel 'sdpa' declined .*: a bias with bfloat16 inputs"
    with pytest.raises(dispatch.KernelDeclined, match=why):
        with dispatch.forced_kernel("sdpa"):
            ours(x.bfloat16(), x.bfloat16(), x.bfloat16(), key_padding_mask=pad, need_weights=False)
    assert not dispatch.is_forced("sdpa")  # restored after the error


@register_modifier
class _ProbePrev(AttentionModifier):
    """Only the previous token (as a band): the first token of each sentence sees no key."""

    name = "_probe_prev"

    def restrict(self, ctx):
        return BandMask(1, -1)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("kernel", [None, "band", "sdpa"])
def test_query_with_no_allowed_key_attends_to_nothing_on_every_path(side, kernel):
    ours = _site_attention("_probe_prev")
    x, _, pad, _ = inputs("encoder_self", side)
    dense, w = ours(x, x, x, key_padding_mask=pad, need_head_weights=True)
    with dispatch.forced_kernel(kernel):
        fast, _ = ours(x, x, x, key_padding_mask=pad, need_weights=False)
    real = ~pad.t()
    torch.testing.assert_close(fast[real], dense[real], atol=1e-5, rtol=0)
    first = ((~pad).cumsum(1) == 1) & ~pad  # (B, T): each sentence's first real token
    assert (w.transpose(0, 1)[first.unsqueeze(1).expand(-1, H, -1)] == 0).all()
    expected = ours.out_proj.bias.expand(int(first.sum()), E)
    torch.testing.assert_close(dense.transpose(0, 1)[first], expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("spec", ["_probe_affine", "_probe_affine[drop=1]"])
@pytest.mark.parametrize("kind", ["encoder_self", "cross"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_affine_post_stage_equals_post_on_the_dense_path(spec, kind, side):
    """Without weights an affine post stage runs as keep·(p @ V) + add @ V on a fused kernel;
    values and every gradient equal the dense path's post(p) @ V."""
    ours = _site_attention(spec, kind).train()
    x, kv, pad, _ = inputs(kind, side)
    x.requires_grad_()
    results = []
    for need_weights in (False, True):
        _ProbeAffine.calls = 0
        out, _ = ours(x, kv, kv, key_padding_mask=pad, need_weights=need_weights)
        assert _ProbeAffine.calls == (0 if need_weights else 1)
        grads = torch.autograd.grad((out**2).sum(), [x, *ours.parameters()], allow_unused=True)
        results.append((out, grads))
    (fast, fast_grads), (dense, dense_grads) = results
    torch.testing.assert_close(fast, dense, atol=1e-6, rtol=0)
    for a, b in zip(fast_grads, dense_grads):
        if a is None or b is None:  # drop=1: the keys' projection does not enter (or gets 0)
            assert not any(t is not None and t.any() for t in (a, b))
            continue
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_affine_post_stage_declined_with_attention_dropout_and_head_selection():
    """Dropout acts on post(p), not on p; a modifier on some heads only mixes post(p) and p."""
    x, _, pad, _ = inputs("encoder_self", "left")
    site = AttentionSite("encoder_self", 0, 1, E, H)
    _, dropped = make_pair("encoder_self", build_modifiers(parse_spec("_probe_affine"), site), 0.1)
    some_heads = _site_attention("_probe_affine[heads=2]")
    _ProbeAffine.calls = 0
    dropped.train()(x, x, x, key_padding_mask=pad, need_weights=False)
    out, _ = some_heads(x, x, x, key_padding_mask=pad, need_weights=False)
    assert _ProbeAffine.calls == 0
    dense, _ = some_heads(x, x, x, key_padding_mask=pad, need_weights=True)
    torch.testing.assert_close(out, dense, atol=1e-6, rtol=0)
