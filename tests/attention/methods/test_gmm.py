"""Gaussian mixture cross-attention (Zhang & Feng 2021) against the paper's equations.

The reference below re-states eq. 6-15 and Table 1 with plain loops over heads and
components; it reads only the modifier's parameters, none of its helpers.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention as testing

from localnmt.attention import AttentionSite, LocalAttention, SpecError, dispatch
from localnmt.attention.methods import gmm as gmm_module
from localnmt.attention.methods.gmm import GaussianMixtureRecord
from localnmt.attention.mixture import MixtureParams, MixtureSum, mixture_attention
from localnmt.attention.spec import build_modifiers, parse_spec

E, H, B, TQ, TK = 16, 4, 3, 6, 9
D = E // H


padding = testing.padding_mask


def make(spec: str, seed: int = 0) -> LocalAttention:
    """A cross-attention layer with the spec's modifiers, eval mode."""
    return testing.make_attention("cross", spec, embed_dim=E, heads=H, seed=seed)


def inputs(side: str, lengths=(TK, TK - 3, 2)):
    torch.manual_seed(1)
    x = torch.randn(TQ, B, E)
    src = torch.randn(TK, B, E) * 2
    return x, src, padding(list(lengths), TK, side)


def ffn(mod, name: str, q):
    """V^T tanh(W^T q + b1) + b2 of one predictor, written with its raw weights (eq. 7-9, 14)."""
    w, b1, v, b2 = mod.predictors.weights(name)
    hidden = torch.tanh(q @ w.t() + b1)
    return hidden @ v.t() + b2


def reference(attn: LocalAttention, x, src, pad, opts: dict):
    """Eq. 1-3 and 6-15 for every batch item, head, target token and component."""
    mod = attn.modifiers[0]
    k_comp = int(opts.get("k", 4))
    variant = opts.get("variant", "approx")
    fusion = opts.get("fusion", "gate")
    share = opts.get("share", "none")
    q_all = attn.q_proj(x)  # Q(s_i), not scaled
    k_all, v_all = attn.k_proj(src), attn.v_proj(src)
    out = torch.zeros(TQ, B, E)
    gammas = torch.zeros(H, B, TQ, TK)
    for b in range(B):
        real = (~pad[b]).nonzero().flatten()
        J = len(real)
        for h in range(H):
            sl = slice(h * D, (h + 1) * D)
            q, k, v = q_all[:, b, sl], k_all[real, b, sl], v_all[real, b, sl]
            alpha = torch.softmax(q @ k.t() / math.sqrt(D), dim=-1)  # eq. 1-2, (TQ, J)
            mu_hat, sigma_hat = ffn(mod, "mu", q), ffn(mod, "sigma", q)
            if share == "mean":
                mu_hat = mu_hat.expand(TQ, k_comp)
            if share == "variance":
                sigma_hat = sigma_hat.expand(TQ, k_comp)
            omega_hat = None if share == "weight" or k_comp == 1 else ffn(mod, "omega", q)
            beta = torch.zeros(TQ, J)
            prev_mu = torch.zeros(k_comp)
            for i in range(TQ):
                for kk in range(k_comp):
                    if variant == "synthesis":  # Table 1, first row
                        Z = 1.0
                        w = 1.0 if omega_hat is None else math.exp(omega_hat[i, kk])
                        mu = prev_mu[kk] + math.exp(mu_hat[i, kk])
                        sigma = math.sqrt(math.exp(-sigma_hat[i, kk]) / 2)
                    else:
                        if omega_hat is None:
                            w = 1.0 / k_comp
                        else:
                            w = torch.softmax(omega_hat[i], -1)[kk]  # eq. 10
                        mu = J * torch.sigmoid(mu_hat[i, kk])  # eq. 11
                        s = torch.sigmoid(sigma_hat[i, kk])
                        if variant == "norm":
                            sigma = J * s
                        else:  # eq. 12
                            sigma = min(J / 6 * s, mu / 3, (J - mu) / 3)
                        sigma = max(float(sigma), 0.5)  # guard σ > 0 (sigma_min)
                        Z = math.sqrt(2 * math.pi * sigma**2)
                    for j in range(J):  # eq. 6, j counted from the first real token
                        pos = j + 0.5  # cell centre (option offset)
                        beta[i, j] += w / Z * math.exp(-((pos - mu) ** 2) / (2 * sigma**2))
                    if variant == "synthesis":
                        prev_mu[kk] = mu
            if variant == "norm":
                beta = beta / beta.sum(-1, keepdim=True)
            if fusion == "gate":
                g = torch.sigmoid(ffn(mod, "gate", q))  # eq. 14, (TQ, 1)
            elif fusion == "average":
                g = torch.full((TQ, 1), 0.5)
            else:
                g = torch.ones(TQ, 1)
            gamma = beta if fusion == "gmm" else (1 - g) * alpha + g * beta  # eq. 13
            out[:, b, sl] = gamma @ v  # eq. 15
            gammas[h, b][:, real] = gamma
    return attn.out_proj(out), gammas


CASES = [
    {},
    {"variant": "norm"},
    {"variant": "synthesis"},
    {"k": "1"},
    {"share": "mean"},
    {"share": "variance"},
    {"share": "weight"},
    {"fusion": "average"},
    {"fusion": "gmm"},
    {"variant": "synthesis", "share": "weight"},
]


def spec_of(opts: dict) -> str:
    body = ",".join(f"{k}={v}" for k, v in opts.items())
    return f"gmm[{body}]" if body else "gmm"


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("opts", CASES, ids=spec_of)
def test_matches_paper_equations(opts, side):
    attn = make(spec_of(opts))
    x, src, pad = inputs(side)
    with torch.no_grad():
        out, w = attn(x, src, src, key_padding_mask=pad, need_head_weights=True)
        ref_out, ref_w = reference(attn, x, src, pad, opts)
    torch.testing.assert_close(w, ref_w, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(out, ref_out, atol=2e-5, rtol=1e-4)


def test_sigma_floor_and_coverage():
    """Approximate normalisation: with σ ≥ 0.5 and the 3σ interval inside the sentence, each
    component sums to ≈1 on the integer grid (the paper's ">90 % coverage")."""
    J = 40
    mu = torch.tensor([0.05, 1.7, 10.3, 25.0, 38.4, 39.95])
    sigma = torch.minimum(torch.minimum(torch.full_like(mu, J / 6 * 0.9), mu / 3), (J - mu) / 3)
    sigma = sigma.clamp(min=0.5)
    params = MixtureParams(
        log_scale=(-0.5 * math.log(2 * math.pi) - sigma.log()).view(1, 1, 6, 1),
        mu=mu.view(1, 1, 6, 1),
        sigma=sigma.view(1, 1, 6, 1),
        log_omega=torch.zeros(1, 1, 6, 1),
    )
    cells = torch.arange(J).float()[None] + 0.5
    beta = mixture_attention(params, cells, None, normalise=False)
    sums = beta.sum(-1).flatten()
    assert (beta <= 0.8).all()  # 1/Z ≤ 1/(√(2π)·0.5)
    assert (sums[1:-1] > 0.98).all() and (sums < 1.02).all()
    assert (sums[[0, -1]] > 0.45).all()  # floored σ at the very ends: half the mass


@pytest.mark.parametrize("side", ["left", "right"])
def test_strict_normalisation_survives_underflow(side):
    """Our Method+Norm.: each row is Σ_k ω_k N(j; μ_k, σ_k) over the real keys divided by its
    sum, also where every term underflows float32 (weights e^-300, means off the sentence);
    the reference sums in log space, in float64."""
    torch.manual_seed(3)
    lengths, tk, k = [7, 4], 7, 3
    real = ~padding(lengths, tk, side)
    positions = (real.cumsum(-1) - 1).clamp(min=0).float() + 0.5  # from the first real key
    shape = (2, 2, 5, k)
    mu = torch.rand(shape) * 12 - 3  # some means before or after the sentence
    sigma = torch.rand(shape) * 2 + 0.5
    mu[:, :, 0], sigma[:, :, 0] = torch.tensor([-20.0, 30.0, 45.0]), 0.5  # all far off: e^-800
    log_scale = torch.randn(shape) - 300.0
    params = MixtureParams(log_scale, mu, sigma, log_scale)
    length = torch.tensor(lengths, dtype=torch.float)[:, None, None, None].expand(2, 1, 5, 1)
    beta = mixture_attention(params, positions, real, normalise=True, length=length)
    j = positions.double()[:, None, None, None, :]
    z = (j - mu.double().unsqueeze(-1)) / sigma.double().unsqueeze(-1)
    log_beta = torch.logsumexp(log_scale.double().unsqueeze(-1) - z * z / 2, dim=-2)
    ref = torch.softmax(log_beta.masked_fill(~real[:, None, None, :], -math.inf), dim=-1)
    assert torch.isfinite(beta).all()
    torch.testing.assert_close(beta.double(), ref, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("spec", ["gmm", "gmm[variant=norm]", "gmm[variant=synthesis]"])
def test_incremental_equals_full_forward(spec):
    attn = make(spec)
    x, src, pad = inputs("left")
    with torch.no_grad():
        full, _ = attn(x, src, src, key_padding_mask=pad, need_weights=False)
        state: dict = {}
        for t in range(TQ):
            o, _ = attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                        static_kv=True, need_weights=False)  # fmt: skip
            torch.testing.assert_close(o[0], full[t], atol=1e-5, rtol=0)


def test_synthesis_state_follows_beam_reordering():
    """Beam search moves hypotheses within a sentence: three hypotheses of one source."""
    attn = make("gmm[variant=synthesis]")
    x, src, pad = inputs("right")
    src, pad = src[:, :1].expand(-1, 3, -1), pad[:1].expand(3, -1)  # one sentence, beam 3
    order = torch.tensor([2, 0, 0])
    with torch.no_grad():
        state: dict = {}
        attn(x[:2], src, src, key_padding_mask=pad, incremental_state=state, static_kv=True)
        attn.reorder_incremental_state(state, order)
        out, _ = attn(x[2:3, order], src, src, key_padding_mask=pad,
                      incremental_state=state, static_kv=True)  # fmt: skip
        full, _ = attn(x[:3, order], src, src, key_padding_mask=pad)
    torch.testing.assert_close(out[0], full[2], atol=1e-5, rtol=0)


def test_source_buffers_move_only_when_the_batch_shrinks():
    """Source-only buffers (keys, values, padding, positions) stay put under a same-size
    reorder, as in fairseq; the synthesis state always follows the hypotheses."""
    attn = make("gmm[variant=synthesis]")
    x, src, pad = inputs("left")
    with torch.no_grad():
        state: dict = {}
        attn(x[:2], src, src, key_padding_mask=pad, incremental_state=state, static_kv=True)
        before = dict(attn._get_input_buffer(state))
        assert {"prev_key", "key_positions", "key_lengths"} <= set(before)
        attn.reorder_incremental_state(state, torch.tensor([1, 1, 0]))
        after = attn._get_input_buffer(state)
        for name in ("prev_key", "prev_value", "prev_key_padding_mask", "key_positions"):
            assert after[name] is before[name]
        mu = [k for k in after if k not in before or after[k] is not before[k]]
        assert mu, "the synthesis mean must be reordered"
        attn.reorder_incremental_state(state, torch.tensor([2, 0]))
        after = attn._get_input_buffer(state)
        torch.testing.assert_close(after["prev_key"], before["prev_key"][[2, 0]])
        torch.testing.assert_close(after["key_positions"], before["key_positions"][[2, 0]])


@pytest.mark.parametrize("opts", CASES, ids=spec_of)
def test_gradients_reach_every_parameter(opts):
    attn = make(spec_of(opts)).train()
    x, src, pad = inputs("left")
    out, _ = attn(x, src, src, key_padding_mask=pad, need_weights=False)
    out.pow(2).sum().backward()
    for name, p in attn.modifiers[0].named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        assert torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("spec", ["gmm", "gmm[variant=norm]", "gmm[variant=synthesis]"])
def test_half_precision_no_nan(dtype, spec):
    attn = make(spec).to(dtype).train()
    x, src, pad = inputs("left")
    try:
        out, _ = attn(x.to(dtype), src.to(dtype), src.to(dtype), key_padding_mask=pad)
        out.float().pow(2).sum().backward()
    except RuntimeError as err:  # some CPU builds lack fp16 kernels
        pytest.skip(f"{dtype} unsupported here: {err}")
    assert out.dtype == dtype and torch.isfinite(out.float()).all()
    assert all(
        torch.isfinite(p.grad.float()).all() for p in attn.parameters() if p.grad is not None
    )


@pytest.mark.parametrize("spec", ["gmm", "gmm[variant=norm]", "gmm[variant=synthesis]"])
def test_source_of_only_padding_gives_no_nan(spec):
    attn = make(spec).train()
    x, src, _ = inputs("left")
    pad = padding([TK, 0, 1], TK, "left")
    out, w = attn(x, src, src, key_padding_mask=pad)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters() if p.grad is not None)


def test_padding_keys_get_no_weight_and_recording():
    attn = make("gmm")
    attn.recording = True
    x, src, pad = inputs("left")
    _, w = attn(x, src, src, key_padding_mask=pad, need_head_weights=True)
    assert (w.masked_select(pad[None, :, None, :]) == 0).all()
    rec = attn.last_record.get(GaussianMixtureRecord)
    assert rec.alpha.shape == rec.beta.shape == (B, H, TQ, TK)
    torch.testing.assert_close(rec.alpha, attn.last_record.probs_before_post)
    assert rec.gate.shape == (B, H, TQ)
    assert rec.mu.shape == rec.sigma.shape == rec.omega.shape == (B, H, TQ, 4)
    J = (~pad).sum(1).float()
    assert (rec.mu <= J[:, None, None, None]).all() and (rec.sigma >= 0.5).all()
    torch.testing.assert_close(rec.omega.sum(-1), torch.ones(B, H, TQ))
    gamma = torch.lerp(rec.alpha, rec.beta, rec.gate.unsqueeze(-1))  # eq. 13
    torch.testing.assert_close(attn.last_record.probs, gamma)


def test_heads_option_keeps_other_heads_dot_product():
    attn = make("gmm[heads=2]")
    base = make("")
    base.load_state_dict(attn.state_dict(), strict=False)
    x, src, pad = inputs("right")
    _, w = attn(x, src, src, key_padding_mask=pad, need_head_weights=True)
    _, w0 = base(x, src, src, key_padding_mask=pad, need_head_weights=True)
    torch.testing.assert_close(w[[0, 2, 3]], w0[[0, 2, 3]])
    assert not torch.allclose(w[1], w0[1])


@pytest.mark.parametrize(
    "spec,kind",
    [("gmm", "encoder_self"), ("gmm", "decoder_self"), ("gmm[k=0]", "cross")],
)
def test_invalid_specs_are_rejected(spec, kind):
    site = AttentionSite(kind, 0, 1, E, H)
    with pytest.raises(SpecError):
        build_modifiers(parse_spec(spec), site)


def test_mixture_sum_gradients():
    """The memory-saving mixture Function against autograd's finite differences, with
    per-component parameters and with parameters shared across components (stride 0)."""
    torch.manual_seed(0)
    shape = (2, 3, 4, 3)
    j = torch.arange(TK, dtype=torch.double)[None, None, None, None, :] + 0.5
    scale = torch.randn(shape, dtype=torch.double, requires_grad=True)
    mu = (torch.rand(shape, dtype=torch.double) * TK).requires_grad_()
    sigma = (torch.rand(shape, dtype=torch.double) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(MixtureSum.apply, (scale, mu, sigma, j))
    shared_mu = (torch.rand(shape[:-1] + (1,), dtype=torch.double) * TK).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda s, m, g: MixtureSum.apply(s, m.expand(shape), g, j), (scale, shared_mu, sigma)
    )


def _saved_maps(spec: str, b: int = 2, tq: int = 8, tk: int = 256) -> float:
    """Bytes autograd keeps for backward after one training forward, in attention maps."""
    attn = make(spec).train()
    x, src = torch.randn(tq, b, E), torch.randn(tk, b, E)
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attn(x, src, src, need_weights=False)
    return sum(storages.values()) / (b * H * tq * tk * 4)


@pytest.mark.parametrize("variant", ["approx", "norm", "synthesis"])
def test_training_memory_does_not_grow_with_components(variant):
    """The (B, H, Tq, K, Tk) mixture terms are recomputed in backward, not kept (only the
    (B, H, Tq, K) parameters grow with K: 1/32 of a map each at Tk = 256)."""
    one, eight = (_saved_maps(f"gmm[variant={variant},k={k}]") for k in (1, 8))
    assert eight - one < 0.5, (one, eight)
    assert eight < 8


@pytest.mark.parametrize("variant", ["approx", "norm"])
def test_mixture_params_values_and_gradients_match_eq_10_to_12(variant):
    """ω, μ, σ and log ω − log Z (eq. 10-12, σ floored at 0.5) written term by term, against
    the modifier's conversion from one shared sigmoid, values and gradients."""
    mod = make(f"gmm[variant={variant}]").modifiers[0]
    torch.manual_seed(5)
    raw = {n: (torch.randn(B, H, TQ, 4) * 3).requires_grad_() for n in ("mu", "sigma", "omega")}
    length = torch.tensor([9.0, 6.0, 2.0])[:, None, None, None].expand(B, 1, TQ, 1)
    squashed = {n: torch.sigmoid(raw[n]) for n in ("mu", "sigma")}
    params = mod.mixture_params(None, raw, length, squashed)  # type: ignore[arg-type]

    omega = torch.softmax(raw["omega"], dim=-1)  # eq. 10
    mu = length * torch.sigmoid(raw["mu"])  # eq. 11
    if variant == "norm":
        sigma = length * torch.sigmoid(raw["sigma"])
    else:  # eq. 12
        candidates = (length / 6 * torch.sigmoid(raw["sigma"]), mu / 3, (length - mu) / 3)
        sigma = torch.stack(candidates).amin(dim=0)
    sigma = torch.where(sigma > 0.5, sigma, torch.full_like(sigma, 0.5))
    log_scale = torch.log(omega / torch.sqrt(2 * math.pi * sigma**2))
    weights = [torch.randn(B, H, TQ, 4) for _ in range(3)]
    ours = [params.log_scale, params.mu, params.sigma]
    ref = [log_scale, mu, sigma]
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    grads = [
        torch.autograd.grad(sum((w * t).sum() for w, t in zip(weights, ts)), list(raw.values()))
        for ts in (ours, ref)
    ]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("layout", ["contiguous", "heads split from (B, T, H·d)"])
def test_predictor_outputs_padding_columns_are_zero(layout):
    """K = 4 with a gate has 13 outputs, computed 16 wide (GEMM panel): the 3 extra columns
    are exactly 0 and every named output equals its own FFN (eq. 7-9, 14), also on queries
    laid out as transformers splits its heads (a transposed view, no autograd)."""
    mod = make("gmm").modifiers[0]
    q = torch.randn(B, H, TQ, D)
    if layout != "contiguous":
        q = torch.randn(B, TQ, H, D).transpose(1, 2)
    with torch.no_grad():
        outputs = mod.predictors.outputs(q)
        named = mod.predictors.split(outputs)
    assert outputs.size(-1) == 16
    assert torch.equal(outputs[..., 13:], torch.zeros(B, H, TQ, 3))
    for name in ("mu", "sigma", "omega", "gate"):
        torch.testing.assert_close(named[name], ffn(mod, name, q), atol=1e-5, rtol=1e-5)


def test_predictor_outputs_of_an_empty_batch():
    """No rows (every hypothesis finished, an empty batch): the predictors still give a
    ``(0, H, Tq, width)``, without autograd and through their hand-written backward."""
    bank = make("gmm").modifiers[0].predictors
    with torch.no_grad():
        assert bank.outputs(torch.randn(0, H, 1, D)).shape == (0, H, 1, 16)
    q = torch.randn(0, H, TQ, D, requires_grad=True)
    out = bank.outputs(q)
    assert out.shape == (0, H, TQ, 16)
    out.sum().backward()
    assert q.grad.shape == q.shape and not bank.hidden_weight.grad.any()


def test_new_decoding_run_reads_weights_written_through_data():
    """The folded predictor weights are kept across the steps of one decoding run only: a
    write through ``.data`` (no version counter sees it) is read at the next run."""
    attn = make("gmm")
    x, src, pad = inputs("left")
    bank = attn.modifiers[0].predictors

    def step() -> torch.Tensor:
        with torch.no_grad():
            return attn(x[:1], src, src, key_padding_mask=pad, incremental_state={},
                        static_kv=True, need_head_weights=True)[1]  # fmt: skip

    before = step()
    bank.hidden_weight.data.copy_(torch.randn_like(bank.hidden_weight))
    after = step()
    with torch.no_grad():
        full = attn(x[:1], src, src, key_padding_mask=pad, need_head_weights=True)[1]
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, full, atol=1e-6, rtol=0)


def test_training_takes_the_dense_path_by_default():
    """``AFFINE_ON_CPU`` is off by default: a training call on the CPU without weights forms α
    and γ."""
    assert gmm_module.AFFINE_ON_CPU is False
    attn = make("gmm[k=2]").train()
    x, src, pad = inputs("left")
    with dispatch.trace() as seen:
        attn(x, src, src, key_padding_mask=pad, need_weights=False)
    calls = [(c.kernel, *c.detail) for c in seen.calls if c.op == "attention"]
    assert calls == [("dense", "post stage of gmm is not affine here")]


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("opts", CASES, ids=spec_of)
def test_training_without_weights_equals_dense_path(opts, side, monkeypatch):
    """With ``AFFINE_ON_CPU`` on and without weights, eq. 13 runs as (1 − g)·(α @ V) +
    (g·β) @ V on a fused kernel (``post_affine``); output and every gradient equal the dense
    path's γ @ V."""
    monkeypatch.setattr(gmm_module, "AFFINE_ON_CPU", True)
    attn = make(spec_of(opts)).train()
    x, src, pad = inputs(side)
    x.requires_grad_()
    results, kernels = [], []
    for need_weights in (False, True):
        with dispatch.trace() as seen:
            out, _ = attn(x, src, src, key_padding_mask=pad, need_weights=need_weights)
        kernels.append([(c.kernel, *c.detail) for c in seen.calls if c.op == "attention"])
        grads = torch.autograd.grad((out**2).sum(), [x, *attn.parameters()], allow_unused=True)
        results.append((out, grads))
    assert kernels[1] == [("dense", "weights requested")]
    # the affine path ran: α @ V from a kernel, or (fusion=gmm, keep = 0) none at all
    assert all(k[0] != "dense" or "replaces p" in k[1] for k in kernels[0])
    (fast, fast_grads), (dense, dense_grads) = results
    torch.testing.assert_close(fast, dense, atol=1e-5, rtol=1e-5)
    for a, b in zip(fast_grads, dense_grads):
        if a is None or b is None:  # fusion=gmm: the keys' projection does not enter
            assert not any(t is not None and t.any() for t in (a, b))
            continue
        torch.testing.assert_close(a, b, atol=1e-5 * max(float(b.abs().max()), 1.0), rtol=1e-4)
