"""The fused C decoding step of GMM cross-attention (kernel ``gmm_c_step``, fast/gmm_mixture.py
over fast/native/gmm_step.py) against the torch ops.

Each case decodes step by step twice, through the C step and through the torch ops of
``GaussianMixture.post``, and checks that the C step really ran (or really declined).
"""

from __future__ import annotations

import shutil
import sysconfig

import pytest
import torch
from helpers.attention import (
    GMM_APPROX_SPECS,
    CountCalls,
    make_attention,
    padding_mask,
)

from localnmt.attention import LocalAttention, dispatch
from localnmt.attention.fast.native import gmm_step
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

    def step(module, inp, source):
        return module(inp[:1], source, source, key_padding_mask=pad, incremental_state={},
                      static_kv=True)[0]  # fmt: skip

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
        step(attn, x, src)
    assert counter.calls == {"mixture_post": 1}
    assert seen.kernels("gmm mixture") == ["gmm_c_step"]
    with dispatch.trace() as seen:
        step(attn, x, src)  # autograd again: declined, and the trace says why
    (call,) = [c for c in seen.calls if c.op == "gmm mixture"]
    assert call.declined["gmm_c_step"] == ["needs gradients (the C step has no backward)"]


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
