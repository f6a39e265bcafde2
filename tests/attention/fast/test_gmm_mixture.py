"""GMM cross-attention's C training kernels (``gmm_c_raw``, ``gmm_c_params``:
fast/gmm_mixture.py over fast/native/c_gmm_mixture.py) against the torch ops.

The torch ops (``GaussianMixture.mixture_params``, ``mixture.mixture_attention``,
``torch.lerp``) are themselves tested against the paper's equations in
``methods/test_gmm.py``; here every C function must give their values and gradients, and the
C path must really run (or really decline, with its reason).
"""

from __future__ import annotations

import pytest
import torch
from helpers.attention import (
    GMM_APPROX_SPECS,
    CountCalls,
    make_attention,
    padding_mask,
)

from localnmt.attention import dispatch
from localnmt.attention.fast.native import c_gmm_mixture
from localnmt.attention.mixture import MixtureParams, mixture_attention

C_EXTENSION = c_gmm_mixture._gmm_mixture  # for the ``build`` fixture (conftest.py)
needs_extension = pytest.mark.skipif(
    C_EXTENSION is None, reason="localnmt._gmm_mixture was not built (no C compiler)"
)
E, H, B, TQ = 16, 4, 3, 5


def make(spec: str):
    """A GMM cross-attention layer (16 dims, 4 heads), eval mode."""
    return make_attention("cross", spec, embed_dim=E, heads=H)


def assert_grads_close(got, expected) -> None:
    """Gradients to a few float32 roundings of their largest entry (exp and log round
    differently in C, and μ = J·sigmoid amplifies them by up to J/σ in z)."""
    for a, b in zip(got, expected):
        if a is None or b is None:
            assert not any(t is not None and t.any() for t in (a, b))
            continue
        scale = max(float(b.abs().max()), 1.0)  # (k_proj.bias: 0 in exact arithmetic)
        torch.testing.assert_close(a, b, atol=1e-5 * scale, rtol=1e-4)


def mixture_inputs(tk: int, side: str | None, k: int = 4, seed: int = 0):
    """``log ω − log Z``, μ, σ ``(B, 2, TQ, k)``, positions and real keys ``(B, tk)``, a
    softmax α and a gate: random, with σ from the floor up and μ across the source."""
    torch.manual_seed(seed)
    shape = (B, 2, TQ, k)
    c = torch.randn(shape).requires_grad_()
    mu = (torch.rand(shape) * tk).requires_grad_()
    sigma = (torch.rand(shape) * 3 + 0.5).requires_grad_()
    real = None
    positions = torch.arange(tk, dtype=torch.float32).expand(B, tk) + 0.5
    if side is not None:
        real = ~padding_mask([tk, max(1, tk - 3), max(1, tk // 3)], tk, side)
        leading = (~real).long().cumprod(1).sum(1, keepdim=True)  # j counts from the first
        positions = positions - leading.float()  # real key
    alpha = torch.softmax(torch.randn(B, 2, TQ, tk), -1).requires_grad_()
    gate = torch.rand(B, 2, TQ, 1).requires_grad_()
    return c, mu, sigma, positions.contiguous(), real, alpha, gate


def torch_gated(c, mu, sigma, positions, real, gate, alpha=None):
    beta = mixture_attention(MixtureParams(c, mu, sigma, c), positions, real, False)
    return beta * gate if alpha is None else torch.lerp(alpha, beta, gate)


@needs_extension
@pytest.mark.parametrize("tk", [1, 9, 32, 37])
@pytest.mark.parametrize("side", ["left", "right", None])
@pytest.mark.parametrize("form", ["lerp", "gated", "fixed 0.5", "beta only"])
def test_gated_mixture_matches_torch_ops(tk, side, form, build):
    """lerp(α, β, g), g·β with a learned gate, with a fixed gate and β alone (g = 1):
    values and the gradients of every input, each build, keys in and beyond 16-key lanes."""
    c, mu, sigma, positions, real, alpha, gate = mixture_inputs(tk, side)
    used_alpha = alpha if form == "lerp" else None
    used_gate = {"fixed 0.5": 0.5, "beta only": 1.0}.get(form, gate)
    inputs = [c, mu, sigma] + ([alpha] if used_alpha is not None else [])
    inputs += [gate] if isinstance(used_gate, torch.Tensor) else []
    grad = torch.randn(B, 2, TQ, tk)
    got = c_gmm_mixture.gated_mixture(c, mu, sigma, positions, real, used_gate, used_alpha,
                                    (B, 2, TQ, tk))  # fmt: skip
    assert got is not None
    expected = torch_gated(c, mu, sigma, positions, real, used_gate, used_alpha)
    torch.testing.assert_close(got, expected, atol=1e-30, rtol=1e-5)
    assert_grads_close(torch.autograd.grad(got, inputs, grad),
                       torch.autograd.grad(expected, inputs, grad))  # fmt: skip


@needs_extension
def test_gated_mixture_with_parameters_shared_across_components():
    """μ shared by every component (stride 0, Table 3 "share mean") gets the summed gradient."""
    c, mu, sigma, positions, real, alpha, gate = mixture_inputs(11, "left")
    shared = mu[..., :1].detach().requires_grad_()
    got = c_gmm_mixture.gated_mixture(c, shared.expand_as(mu), sigma, positions, real, gate, alpha)
    expected = torch_gated(c, shared.expand_as(mu), sigma, positions, real, gate, alpha)
    assert got is not None
    grad = torch.randn_like(expected)
    assert_grads_close(torch.autograd.grad(got, [shared, c], grad),
                       torch.autograd.grad(expected, [shared, c], grad))  # fmt: skip


@needs_extension
def test_backward_with_create_graph_takes_the_torch_ops(monkeypatch):
    """A backward that must be differentiable (create_graph) runs the torch ops, not C."""
    c, mu, sigma, positions, real, alpha, gate = mixture_inputs(9, "right")
    counter = CountCalls(c_gmm_mixture._gmm_mixture)
    monkeypatch.setattr(c_gmm_mixture, "_gmm_mixture", counter)
    out = c_gmm_mixture.gated_mixture(c, mu, sigma, positions, real, gate, alpha)
    got = torch.autograd.grad((out**2).sum(), [c, mu, sigma, alpha, gate], create_graph=True)
    expected_out = torch_gated(c, mu, sigma, positions, real, gate, alpha)
    expected = torch.autograd.grad((expected_out**2).sum(), [c, mu, sigma, alpha, gate])
    assert_grads_close(got, expected)
    assert all(g.requires_grad for g in got)
    assert counter.calls == {"forward": 1}


@needs_extension
def test_declines_what_it_cannot_take():
    c, mu, sigma, positions, real, alpha, gate = mixture_inputs(9, "left")
    take = c_gmm_mixture.gated_mixture
    assert take(c.double(), mu, sigma, positions, real, gate, alpha) is None
    assert take(c, mu, sigma, positions, real.float(), gate, alpha) is None
    assert take(c, mu, sigma, positions, real, gate) is None  # no shape without α
    assert take(c, mu, sigma, positions[:2], real, gate, alpha) is None
    assert take(c, mu, sigma, positions, real, gate, alpha[..., :0]) is None
    with torch.no_grad():
        assert take(c, mu, sigma, positions, real, gate, alpha) is not None


# ---- eq. 10-12 and 14 from the raw predictor outputs ---------------------------------------

APPROX_SPECS = GMM_APPROX_SPECS


def raw_case(mod, tk: int, kind: str):
    """Raw predictor outputs ``(B, 2, TQ, C)`` and J ``(B, 1, TQ, 1)``: random, or where
    eq. 12's other branches act with unsaturated sigmoids: μ = J/2 exactly (min(μ, J − μ)
    ties), σ̂ = −4 (σ at its floor), μ̂ = 2 with σ̂ = 3 (μ near the end bounds σ); or
    "saturated": outputs up to ±100, where every sigmoid and the softmax of ω saturate."""
    torch.manual_seed(3)
    width = mod.predictors.out_weight.size(0)
    raw = torch.randn(B, 2, TQ, width) * (40 if kind == "saturated" else 2)
    layout = mod._step_layout
    if kind == "ends and floors":
        mu = slice(layout.mu_col, layout.mu_col + layout.mu_n)
        sigma = slice(layout.sigma_col, layout.sigma_col + layout.sigma_n)
        raw[..., mu] = 0.0
        raw[:, 0, :, sigma] = -4.0
        raw[:, 1, :2, mu] = 2.0
        raw[:, 1, :, sigma] = 3.0
    length = torch.tensor([tk, max(1, tk - 3), max(1, tk // 3)], dtype=torch.float32)
    return raw.requires_grad_(), length.view(B, 1, 1, 1).expand(B, 1, TQ, 1)


@needs_extension
@pytest.mark.parametrize("spec", APPROX_SPECS)
@pytest.mark.parametrize("kind", ["random", "ends and floors", "saturated"])
def test_parameters_from_raw_outputs_match_torch_ops(spec, kind, build, monkeypatch):
    """approx_gated_mixture against GaussianMixture.mixture_params + the torch mixture:
    values and the gradient of the raw outputs, with and without α."""
    mod = make(spec).modifiers[0]
    tk = 13
    raw, length = raw_case(mod, tk, kind)
    _, _, _, positions, real, alpha, _ = mixture_inputs(tk, "left")
    counter = CountCalls(c_gmm_mixture._gmm_mixture)
    monkeypatch.setattr(c_gmm_mixture, "_gmm_mixture", counter)

    def reference(r):
        params, gate = mod._mixture_and_gate(None, r, length)
        return params.log_scale, params.mu, params.sigma, gate

    for with_alpha in (False, True):
        a = alpha if with_alpha and mod.options.fusion != "gmm" else None
        got = c_gmm_mixture.approx_gated_mixture(mod._step_layout, raw, length, positions, real,
                                               (B, 2, TQ, tk), reference, a)  # fmt: skip
        assert got is not None
        c, mu, sigma, gate = reference(raw)
        expected = torch_gated(c, mu, sigma, positions, real, gate, a)
        torch.testing.assert_close(got, expected, atol=1e-30, rtol=1e-5)
        grad = torch.randn_like(expected)
        inputs = [raw] + ([a] if a is not None else [])
        assert_grads_close(torch.autograd.grad(got, inputs, grad),
                           torch.autograd.grad(expected, inputs, grad))  # fmt: skip
    assert counter.calls["params_forward"] == counter.calls["params_backward"] == 2


# ---- the layer: C path on and off ----------------------------------------------------------


def layer_results(spec: str, side: str | None, need_weights: bool, fused: bool, monkeypatch):
    """Output and the gradients of the input and every parameter of a training layer, and
    the C calls made."""
    attn = make(spec).train()
    torch.manual_seed(1)
    x = torch.randn(TQ, B, E, requires_grad=True)
    tk = 21
    src = torch.randn(tk, B, E) * 2
    pad = None
    if side is not None:
        pad = padding_mask([tk, tk - 4, 3], tk, side)
    counter = CountCalls(c_gmm_mixture._gmm_mixture)
    monkeypatch.setattr(c_gmm_mixture, "_gmm_mixture", counter)
    monkeypatch.setattr(c_gmm_mixture, "ENABLED", fused)
    with dispatch.trace() as seen:
        out, _ = attn(x, src, src, key_padding_mask=pad, need_weights=need_weights)
    params = [p for p in attn.parameters()]
    grads = torch.autograd.grad((out**2).sum(), [x, *params], allow_unused=True)
    return out, grads, counter.calls, seen.kernels("gmm mixture")


@needs_extension
@pytest.mark.parametrize("spec", [*APPROX_SPECS, "gmm[variant=synthesis]", "gmm[variant=norm]"])
@pytest.mark.parametrize("side", ["left", "right", None])
@pytest.mark.parametrize("need_weights", [False, True])
def test_training_layer_with_and_without_the_c_path(spec, side, need_weights, monkeypatch):
    """The whole cross-attention layer in training: the C path gives the torch ops' output
    and gradients; approx runs eq. 6 and 10-14 in C, synthesis eq. 6 and 13, norm neither."""
    fused = layer_results(spec, side, need_weights, True, monkeypatch)
    eager = layer_results(spec, side, need_weights, False, monkeypatch)
    torch.testing.assert_close(fused[0], eager[0], atol=1e-6, rtol=1e-5)
    assert_grads_close(fused[1], eager[1])
    assert eager[2] == {}
    calls = fused[2]
    mixture_runs = 0 if "norm" in spec else 1
    assert calls.get("forward", 0) == calls.get("backward", 0) == mixture_runs
    params_runs = 0 if "variant" in spec else 1
    assert calls.get("params_forward", 0) == calls.get("params_backward", 0) == params_runs
    variant = spec.removeprefix("gmm[variant=").rstrip("]")
    ran = {"norm": "gmm_torch", "synthesis": "gmm_c_params"}.get(variant, "gmm_c_raw")
    assert fused[3] == [ran] and eager[3] == ["gmm_torch"]  # the trace names the kernel


@needs_extension
def test_declines_say_why(monkeypatch):
    """The mixture kernels' reasons, as a trace of a training step shows them."""
    x, src = torch.randn(TQ, B, E), torch.randn(9, B, E)
    with dispatch.trace(explain=True) as seen:
        make("gmm[variant=norm]").train()(x, src, src, need_weights=False)
    (call,) = [c for c in seen.calls if c.op == "gmm mixture"]
    assert call.kernel == "gmm_torch"
    assert call.declined == {
        "gmm_c_step": ["not a decoding step"],
        "gmm_c_raw": ["variant is not approx (C computes eq. 10-12 of approx only)"],
        "gmm_c_params": ["variant norm renormalises β (torch ops)"],
    }
    monkeypatch.setattr(c_gmm_mixture, "ENABLED", False)
    with dispatch.trace() as seen:
        make("gmm").train()(x, src, src, need_weights=False)
    (call,) = [c for c in seen.calls if c.op == "gmm mixture"]
    assert call.declined["gmm_c_raw"] == ["localnmt._gmm_mixture is not built (or stale)"]


def test_extension_is_built_where_a_compiler_is():
    import shutil
    import sysconfig

    if shutil.which(sysconfig.get_config_var("CC").split()[0]) is None:
        pytest.skip("no C compiler on this machine")
    assert c_gmm_mixture._gmm_mixture is not None and c_gmm_mixture.ENABLED
