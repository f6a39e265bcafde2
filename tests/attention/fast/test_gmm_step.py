"""The fused C decoding step of GMM cross-attention (kernel ``gmm_c_step``, fast/gmm_mixture.py
over fast/native/gmm_step.py) against the torch ops.

Each case decodes step by step twice, through the C step and through the torch ops of
``GaussianMixture.post``, and checks that the C step really ran (or really declined). Two C
paths: ``mixture_post`` gives γ where the call needs the attention weights (the dense path
forms them), ``attention_step`` the whole step's output where nothing needs them.
"""

from __future__ import annotations

import shutil
import sysconfig
from dataclasses import replace

import pytest
import torch
from helpers.attention import (
    GMM_APPROX_SPECS,
    CountCalls,
    make_attention,
    padding_mask,
)

from localnmt.attention import LocalAttention, dispatch, shared_source
from localnmt.attention.fast.native import gmm_step
from localnmt.attention.methods.gmm import GaussianMixture
from localnmt.attention.mixture import PredictorLayout

E, H, B, TQ = 16, 4, 3, 4
RTOL = 1e-5  # μ = J·sigmoid: one rounding of the sigmoid moves z by up to J/σ ulps

C_EXTENSION = gmm_step._gmm_step  # for the ``build`` fixture (conftest.py)
needs_extension = pytest.mark.skipif(
    C_EXTENSION is None, reason="localnmt._gmm_step was not built (no C compiler)"
)


def make(spec: str) -> LocalAttention:
    """A cross-attention LocalAttention with the spec's modifiers, eval mode."""
    return make_attention("cross", spec, embed_dim=E, heads=H)


def inputs(tk: int, side: str | None, seed: int = 1):
    torch.manual_seed(seed)
    x = torch.randn(TQ, B, E)
    src = torch.randn(tk, B, E) * 2
    if side is None:
        return x, src, None
    return x, src, padding_mask([tk, max(1, tk - 3), max(1, tk // 3)], tk, side)


def decode(attn: LocalAttention, x, src, pad, fused: bool, monkeypatch) -> tuple:
    """Step-by-step outputs and attention weights (γ of eq. 13), with the C step on or off,
    and the number of C calls."""
    counter = CountCalls(gmm_step._gmm_step)
    monkeypatch.setattr(gmm_step, "_gmm_step", counter)
    monkeypatch.setattr(gmm_step, "ENABLED", fused)
    state: dict = {}
    outs, weights = [], []
    with torch.no_grad():
        for t in range(x.size(0)):
            o, w = attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                        static_kv=True, need_head_weights=True)  # fmt: skip
            outs.append(o)
            weights.append(w)
    return torch.stack(outs), torch.stack(weights), counter.calls.get("mixture_post", 0)


def assert_same(fused: tuple, eager: tuple) -> None:
    """γ to a few float32 roundings (exp and log round differently in C), outputs to 1e-6."""
    torch.testing.assert_close(fused[1], eager[1], atol=1e-30, rtol=RTOL)
    torch.testing.assert_close(fused[0], eager[0], atol=1e-6, rtol=0)


SPECS = GMM_APPROX_SPECS


@needs_extension
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("side", ["left", "right", None])
@pytest.mark.parametrize("tk", [1, 9, 32, 37])
def test_fused_step_matches_torch_ops(spec, side, tk, build, monkeypatch):
    attn = make(spec)
    x, src, pad = inputs(tk, side)
    *fused, calls = decode(attn, x, src, pad, True, monkeypatch)
    *eager, none = decode(attn, x, src, pad, False, monkeypatch)
    assert calls == TQ and none == 0
    assert_same(fused, eager)


@needs_extension
@pytest.mark.parametrize("scale", [0.05, 30.0])
def test_fused_step_at_saturated_and_flat_predictors(scale, build, monkeypatch):
    """Large predictor outputs saturate the sigmoids (μ at the ends, σ at its floor, gate at 0
    or 1) and push most terms of eq. 6 under the exp floor; small ones give flat mixtures."""
    attn = make("gmm")
    with torch.no_grad():
        attn.modifiers[0].predictors.out_weight.mul_(scale)
        attn.modifiers[0].predictors.out_bias.mul_(scale)
    x, src, pad = inputs(64, "left")
    *fused, calls = decode(attn, x, src, pad, True, monkeypatch)
    *eager, _ = decode(attn, x, src, pad, False, monkeypatch)
    assert calls == TQ
    assert_same(fused, eager)


@needs_extension
def test_exp_of_eq_6_is_accurate(build):
    """The C loop's exp (a polynomial, vectorised) against exp in float64 over the whole
    range eq. 6 uses: exponents from 0 down to the floor at -87 (z up to 13.2 at σ = 1)."""
    z = torch.linspace(0, 13.3, 200_001)
    out = torch.empty_like(z)
    gmm_step._gmm_step.one_term(out.data_ptr(), z.data_ptr(), z.numel(), 0.0, 0.0, 1.0)
    exponent = (-0.5 * z * z).double().clamp(min=-87.0)  # exact in float32: -0.5·z is
    expected = exponent.exp()
    assert ((out.double() - expected).abs() / expected).max() < 1.2e-7  # 2 ulp; torch: 1


@needs_extension
@pytest.mark.parametrize("spec", ["gmm[variant=norm]", "gmm[variant=synthesis]"])
def test_other_variants_keep_the_torch_ops(spec, monkeypatch):
    attn = make(spec)
    x, src, pad = inputs(9, "left")
    *_, calls = decode(attn, x, src, pad, True, monkeypatch)
    assert calls == 0


@needs_extension
def test_declines_autograd_other_dtypes_and_recording(monkeypatch):
    attn = make("gmm")
    x, src, pad = inputs(9, "right")
    counter = CountCalls(gmm_step._gmm_step)
    monkeypatch.setattr(gmm_step, "_gmm_step", counter)

    def step(module, inp, source, need_weights: bool = True):
        return module(inp[:1], source, source, key_padding_mask=pad, incremental_state={},
                      static_kv=True, need_weights=need_weights)[0]  # fmt: skip

    out = step(attn, x.requires_grad_(), src)  # autograd: the torch ops
    out.sum().backward()
    with torch.no_grad():
        step(attn.double(), x.double(), src.double())
        attn.float()
        attn.recording = True
        step(attn, x, src)
    assert counter.calls == {}
    attn.recording = False
    with torch.no_grad(), dispatch.trace() as seen:
        step(attn, x, src, need_weights=False)
    assert counter.calls == {"attention_step": 1}  # no weights asked: the whole step in C
    assert seen.kernels("gmm step") == ["gmm_c_attention"] and seen.kernels("gmm mixture") == []
    with torch.no_grad(), dispatch.trace() as seen:
        step(attn, x, src)
    assert counter.calls == {"attention_step": 1, "mixture_post": 1}  # γ for the weights
    assert seen.kernels("gmm mixture") == ["gmm_c_step"]
    with dispatch.trace() as seen:
        step(attn, x, src, need_weights=False)  # autograd again: declined, the trace says why
    (call,) = [c for c in seen.calls if c.op == "gmm mixture"]
    assert call.declined["gmm_c_step"] == ["needs gradients (the C step has no backward)"]
    (step_call,) = [c for c in seen.calls if c.op == "gmm step"]
    assert step_call.kernel == "gmm_dense_step" and "gmm_c_attention" in step_call.declined


def test_extension_is_built_where_a_compiler_is():
    """setup.py builds it optionally; on a machine with a C compiler it must be there, or
    every test above would skip and the torch ops would run in decoding unnoticed."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler})")
    assert gmm_step._gmm_step is not None and gmm_step.ENABLED


@needs_extension
def test_declines_a_real_mask_it_cannot_read():
    """``real`` must be (B, Tk) bool and the outputs (B, H, 1, ·): anything else is declined."""
    layout = PredictorLayout.of(("mu", "sigma", "omega", "gate"), (4, 4, 4, 1), 4, "gate",
                                      0.5)  # fmt: skip
    b, h, tk = 2, 3, 5
    outputs, probs = torch.randn(b, h, 1, 16), torch.softmax(torch.randn(b, h, 1, tk), -1)
    positions = torch.arange(tk).float().add(0.5).expand(b, tk)
    length = torch.full((b, 1, 1, 1), float(tk))
    real = torch.ones(b, tk, dtype=torch.bool)
    with torch.no_grad():
        assert gmm_step.mixture_post(layout, outputs, probs, positions, length, real) is not None
        for bad in (real.to(torch.uint8), real.float(), real[:, :-1]):
            assert gmm_step.mixture_post(layout, outputs, probs, positions, length, bad) is None
        assert gmm_step.mixture_post(layout, outputs[:1], probs, positions, length, real) is None


def decode_outputs(attn: LocalAttention, x, src, pad, whole: bool, monkeypatch) -> tuple:
    """Step-by-step outputs without weights, with the C step on (``whole``: the call's output
    from ``attention_step``) or off (the torch ops), and the C calls by name."""
    counter = CountCalls(gmm_step._gmm_step)
    monkeypatch.setattr(gmm_step, "_gmm_step", counter)
    monkeypatch.setattr(gmm_step, "ENABLED", whole)
    state: dict = {}
    outs = []
    with torch.no_grad():
        for t in range(x.size(0)):
            out, _ = attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                          static_kv=True, need_weights=False)  # fmt: skip
            outs.append(out)
    return torch.stack(outs), counter.calls


@needs_extension
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("side", ["left", "right", None])
@pytest.mark.parametrize("tk", [1, 9, 37])
def test_whole_step_matches_torch_ops(spec, side, tk, build, monkeypatch):
    """α from the logits, γ of eq. 13 and γ @ V in one C call, against the dense path's torch
    ops (logits, softmax, ``GaussianMixture.post``, the product with the values)."""
    attn = make(spec)
    x, src, pad = inputs(tk, side)
    whole, calls = decode_outputs(attn, x, src, pad, True, monkeypatch)
    eager, none = decode_outputs(attn, x, src, pad, False, monkeypatch)
    assert calls == {"attention_step": TQ} and none == {}
    torch.testing.assert_close(whole, eager, atol=1e-6, rtol=1e-5)


@needs_extension
@pytest.mark.parametrize("spec", ["gmm", "gmm[k=1]", "gmm[share=weight,fusion=average]"])
@pytest.mark.parametrize(("embed_dim", "heads"), [(16, 4), (96, 8), (160, 5), (64, 1)])
def test_predictors_in_the_step_match_their_torch_ops(spec, embed_dim, heads, build,
                                                      monkeypatch):  # fmt: skip
    """Eq. 7-9 and 14 computed inside the C step (``csrc/gmm_predict.h``) against the same
    step given the predictors' outputs from torch's ``F.linear`` and sigmoid, step by step:
    hidden layers of 16, 48 (a 32-unit block and a tail), 128 units and more; 8, 5 (not a
    multiple of the 4 rows computed together) and 1 heads; one predictor (ω = 1/K, no gate).
    The trace names the path each step took."""
    attn = make_attention("cross", spec, embed_dim=embed_dim, heads=heads)
    x, src, pad = (torch.randn(TQ, B, embed_dim), torch.randn(11, B, embed_dim) * 2,
                   padding_mask([11, 7, 3], 11, "left"))  # fmt: skip
    with dispatch.trace() as seen:
        fused, calls = decode_outputs(attn, x, src, pad, True, monkeypatch)
    assert calls == {"attention_step": TQ}
    assert [c.detail for c in seen.calls if c.op == "gmm step"] == [["predictors in C"]] * TQ
    monkeypatch.setattr(GaussianMixture, "_step_weights", lambda self, ctx: None)
    with dispatch.trace() as seen:
        given, calls = decode_outputs(attn, x, src, pad, True, monkeypatch)
    assert calls == {"attention_step": TQ}
    assert [c.detail for c in seen.calls if c.op == "gmm step"] == [[]] * TQ
    torch.testing.assert_close(fused, given, atol=1e-6, rtol=1e-5)
    eager, _ = decode_outputs(attn, x, src, pad, False, monkeypatch)
    torch.testing.assert_close(fused, eager, atol=1e-6, rtol=1e-5)


@needs_extension
def test_predictor_weights_the_step_cannot_read_build_the_outputs(monkeypatch):
    """Weights of another layout (here: not contiguous) make the C step decline the fused
    predictors; it then builds the outputs with torch's ops and runs as before."""
    attn = make("gmm")
    x, src, pad = inputs(9, "right")
    real = GaussianMixture._step_weights

    def strided(self, ctx):
        weights = real(self, ctx)
        w1t = weights.w1t
        wide = w1t.new_zeros(w1t.size(0), 2 * w1t.size(1))[:, ::2]
        wide.copy_(w1t)
        return replace(weights, w1t=wide)

    monkeypatch.setattr(GaussianMixture, "_step_weights", strided)
    with dispatch.trace() as seen:
        out, calls = decode_outputs(attn, x, src, pad, True, monkeypatch)
    assert calls == {"attention_step": TQ}  # the declined fused call never reached C
    assert all(c.detail == [] for c in seen.calls if c.op == "gmm step")
    monkeypatch.setattr(GaussianMixture, "_step_weights", lambda self, ctx: None)
    expected, _ = decode_outputs(attn, x, src, pad, True, monkeypatch)
    torch.testing.assert_close(out, expected, atol=0, rtol=0)


@needs_extension
def test_whole_step_of_a_sentence_without_real_keys_is_zero(monkeypatch):
    """A source of padding only: the dense path's α and β are 0 there, so is the output
    before the output projection (its bias is what the layer gives)."""
    attn = make("gmm")
    x, src, _ = inputs(6, None)
    pad = padding_mask([6, 2, 4], 6, "left")
    pad[1] = True
    whole, calls = decode_outputs(attn, x, src, pad, True, monkeypatch)
    eager, _ = decode_outputs(attn, x, src, pad, False, monkeypatch)
    assert calls == {"attention_step": TQ}
    torch.testing.assert_close(whole, eager, atol=1e-6, rtol=1e-5)
    bias = attn.out_proj.bias.detach()
    torch.testing.assert_close(whole[:, 0, 1], bias.expand(TQ, E), atol=1e-6, rtol=0)


@needs_extension
@pytest.mark.parametrize("spec", ["gmm", "gmm[fusion=gmm]"])
def test_whole_step_reads_keys_shared_by_beam_hypotheses(spec, monkeypatch):
    """Beam search stores a sentence's keys once for its hypotheses (``shared_source``):
    hypothesis b reads key row b / beam. Against one key row per hypothesis, torch ops."""
    beam = 3
    attn = make(spec)
    x, src, pad = inputs(11, "left")
    src, pad = src.repeat_interleave(beam, dim=1), pad.repeat_interleave(beam, dim=0)
    x = torch.randn(TQ, B * beam, E)
    grouped, calls = decode_outputs(attn, x, src, pad, True, monkeypatch)
    monkeypatch.setattr(shared_source, "ENABLED", False)
    reference, none = decode_outputs(attn, x, src, pad, False, monkeypatch)
    assert calls == {"attention_step": TQ} and none == {}
    torch.testing.assert_close(grouped, reference, atol=1e-6, rtol=1e-5)


@needs_extension
def test_whole_step_steps_aside_for_forced_kernels_and_head_selections(monkeypatch):
    """A forced attention or mixture kernel runs as asked; a method on some heads only
    needs the probabilities."""
    x, src, pad = inputs(9, "right")
    for spec, forced in (("gmm", "dense"), ("gmm", "gmm_c_step"), ("gmm[heads=1-2]", None)):
        with dispatch.forced_kernel(forced):
            _, calls = decode_outputs(make(spec), x, src, pad, True, monkeypatch)
        assert "attention_step" not in calls and calls.get("mixture_post", 0) == TQ


@needs_extension
def test_whole_step_declines_what_it_cannot_take():
    """One query, float32, keys (B / group, H, Tk, d), outputs (B, H, 1, ·), J per sentence."""
    layout = PredictorLayout.of(("mu", "sigma", "omega", "gate"), (4, 4, 4, 1), 4, "gate",
                                0.5)  # fmt: skip
    b, h, tk, d = 4, 3, 5, 8
    q, k, v = torch.randn(b, h, 1, d), torch.randn(b, h, tk, d), torch.randn(b, h, tk, d)
    outputs = torch.randn(b, h, 1, 16)
    positions = torch.arange(tk).float().add(0.5).expand(b, tk)
    length = torch.full((b, 1, 1, 1), float(tk))
    real = torch.ones(b, tk, dtype=torch.bool)

    def step(**changed):
        args = dict(q=q, k=k, v=v, key_group=1, outputs=outputs, positions=positions,
                    length=length, real=real) | changed  # fmt: skip
        return gmm_step.attention_step(layout, **args)

    with torch.no_grad():
        assert step() is not None
        assert step(key_group=2, k=k[::2], v=v[::2]) is not None
        for bad in (
            dict(q=torch.randn(b, h, 2, d)),  # two queries
            dict(k=k[::2], v=v[::2]),  # fewer key rows than the group says
            dict(key_group=3, k=k[:1], v=v[:1]),  # 4 hypotheses are no whole groups of 3
            dict(q=q.double(), k=k.double(), v=v.double()),
            dict(outputs=outputs[:, :, :, :0].expand(b, h, 2, 0)),
            dict(real=real.to(torch.uint8)),
            dict(length=length[:2]),
        ):
            assert step(**bad) is None, bad
    assert step(q=q.requires_grad_()) is None  # autograd: the torch ops


@needs_extension
def test_a_prepared_step_is_attention_step_on_each_steps_tensors():
    """``prepare_step`` checks the source and the layout once; each call then takes its own
    queries, keys, values and raw outputs: bit for bit ``attention_step``'s output on them,
    and None for what ``attention_step`` declines."""
    layout = PredictorLayout.of(("mu", "sigma", "omega", "gate"), (4, 4, 4, 1), 4, "gate",
                                0.5)  # fmt: skip
    b, h, tk, d = 4, 3, 5, 8
    positions = torch.arange(tk).float().add(0.5).expand(b, tk)
    length = torch.full((b, 1, 1, 1), float(tk))
    real = torch.ones(b, tk, dtype=torch.bool)
    real[1, 3:] = False

    def tensors(seed: int):
        torch.manual_seed(seed)
        return (torch.randn(b, h, 1, d), torch.randn(b, h, tk, d), torch.randn(b, h, tk, d),
                torch.randn(b, h, 1, 16))  # fmt: skip

    q, k, v, outputs = tensors(0)
    step = gmm_step.prepare_step(layout, q, k, 1, positions, length, real)
    assert step is not None
    with torch.no_grad():
        for seed in (1, 2):
            q, k, v, outputs = tensors(seed)
            expected = gmm_step.attention_step(layout, q, k, v, 1, outputs, positions, length,
                                               real)  # fmt: skip
            torch.testing.assert_close(step(q, k, v, outputs), expected, atol=0, rtol=0)
        strided = torch.randn(b, h, tk, 2 * d)[..., ::2]  # not contiguous: copied
        strided.copy_(k)
        torch.testing.assert_close(step(q, strided, v, outputs), step(q, k, v, outputs))
        for bad in (
            (torch.randn(b, h, 2, d), k, v, outputs),  # two queries
            (q, k[:, :, :-1], v[:, :, :-1], outputs),  # a source of another length
            (q, k, v[:, :, :-1], outputs),  # values unlike the keys
            (q.double(), k.double(), v.double(), outputs),
            (q, k, v, outputs[:2]),
            (q, k, v, None),  # prepared without the predictors: the outputs are needed
        ):
            assert step(*bad) is None
    assert step(q.requires_grad_(), k, v, outputs) is None  # autograd: the torch ops
    assert gmm_step.prepare_step(layout, q[:, :, :0], k, 1, positions, length, real) is None
    assert gmm_step.prepare_step(layout, q, k, 1, positions.double(), length, real) is None
    assert gmm_step.prepare_step(layout, q, k, 1, positions, length, real.float()) is None
