"""The hard-coded Gaussian's decoding step in C (kernel ``fixed_gaussian_c``,
fast/fixed_gaussian_step.py over fast/native/gmm_step.py) against the torch ops it replaces and
against the definition written with plain loops."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.attention import make_attention, padding_mask

from localnmt.attention import dispatch
from localnmt.attention.fast.native import gmm_step
from localnmt.attention.fixed_gaussian import FixedGaussianProblem, fixed_gaussian_output

E, H, B, TQ, TK = 16, 4, 3, 7, 9

C_EXTENSION = gmm_step._gmm_step  # for the ``build`` fixture (conftest.py)
needs_extension = pytest.mark.skipif(
    C_EXTENSION is None, reason="localnmt._gmm_step was not built (no C compiler)"
)


def decode(spec: str, side: str, kernel: bool) -> tuple[torch.Tensor, list[str]]:
    """Step-by-step outputs ``(TQ, B, E)`` of a hard-coded Gaussian cross-attention with the C
    step in its registry or taken out, and the kernels that ran."""
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    torch.manual_seed(2)
    x, src = torch.randn(TQ, B, E), torch.randn(TK, B, E)
    pad = padding_mask([TK, TK - 4, 2], TK, side)
    state: dict = {}
    outs = []
    removed = dispatch.kernel_removed("fixed_gaussian_c")
    with torch.no_grad(), dispatch.trace() as seen:
        if not kernel:
            removed.__enter__()
        try:
            for t in range(TQ):
                out, _ = attn(x[t : t + 1], src, src, key_padding_mask=pad,
                              incremental_state=state, static_kv=True,
                              need_weights=False)  # fmt: skip
                outs.append(out[0])
        finally:
            if not kernel:
                removed.__exit__(None, None, None)
    return torch.stack(outs), seen.kernels("fixed gaussian")


@needs_extension
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("spec", ["hardcoded_gaussian", "hardcoded_gaussian[ratio=1.5,std=0.7]"])
def test_c_step_matches_the_torch_ops(spec, side, build):
    fused, kernels = decode(spec, side, kernel=True)
    torch_ops, reference = decode(spec, side, kernel=False)
    assert kernels == ["fixed_gaussian_c"] * TQ
    assert reference == ["fixed_gaussian_torch"] * TQ
    torch.testing.assert_close(fused, torch_ops, atol=1e-6, rtol=1e-6)


def definition(problem: FixedGaussianProblem) -> torch.Tensor:
    """``Σ_j p_ij v_j`` with ``p_ij`` over the real keys, written per row with plain loops."""
    batch, tq = problem.query_positions.shape
    heads, tk, dim = problem.v.shape[1:]
    out = torch.zeros(batch, heads, tq, dim, dtype=torch.float64)
    for b in range(batch):
        pad = problem.key_padding_mask
        real = [j for j in range(tk) if pad is None or not pad[b, j]]
        for i in range(tq):
            length = float(problem.key_lengths[b, i])
            mu = min(problem.ratio * float(problem.query_positions[b, i]), max(length - 1, 0.0))
            if real:
                g = {j: math.exp(-((float(problem.key_positions[b, j]) - mu) ** 2)
                                 / (2 * problem.std**2)) for j in real}  # fmt: skip
                p = {j: w / sum(g.values()) for j, w in g.items()}
            else:  # no real key: every key alike, as the softmax of an all-masked row
                p = {j: 1 / tk for j in range(tk)}
            for j, w in p.items():
                out[b, :, i] += w * problem.v[b // problem.key_group, :, j].double()
    return out.float()


def problem(dim: int, key_group: int, side: str) -> FixedGaussianProblem:
    torch.manual_seed(dim)
    batch, heads, tk = 6, 3, 11
    lengths = [11, 7, 1, 0, 5, 11][:batch]
    pad = padding_mask(lengths, tk, side)
    real = ~pad
    key_positions = ((real.cumsum(1) - 1).clamp(min=0) * real).float()
    steps = torch.tensor([0.0, 3.0, 9.0, 2.0, 30.0, 6.0])[:, None]
    v = torch.randn(batch // key_group, tk, heads, dim).transpose(1, 2)  # transformers' layout
    lengths_t = real.sum(1, keepdim=True).float()
    return FixedGaussianProblem(v, key_group, key_positions, steps, lengths_t, pad, 1.25, 1.5)


@needs_extension
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(("dim", "key_group"), [(8, 1), (20, 1), (32, 2), (48, 3)])
def test_c_step_matches_the_definition(dim, key_group, side, build):
    """Head sizes with and without a 16-float tail, beam search's shared source rows, a
    sentence with one real key and one with none."""
    case = problem(dim, key_group, side)
    with dispatch.trace() as seen:
        out = fixed_gaussian_output(case)
    assert seen.kernels() == ["fixed_gaussian_c"]
    torch.testing.assert_close(out, definition(case), atol=2e-6, rtol=1e-5)


def test_c_step_declines_what_it_cannot_take(monkeypatch):
    case = problem(8, 1, "left")
    with dispatch.trace() as seen:
        wide = FixedGaussianProblem(**{**vars(case), "query_positions": case.query_positions
                                       .expand(-1, 2), "key_lengths": case.key_lengths
                                       .expand(-1, 2)})  # fmt: skip
        fixed_gaussian_output(wide)
        grad = FixedGaussianProblem(**{**vars(case), "v": case.v.clone().requires_grad_()})
        fixed_gaussian_output(grad)
        double = FixedGaussianProblem(**{**vars(case), "v": case.v.double(),
                                         "key_positions": case.key_positions.double()})  # fmt: skip
        fixed_gaussian_output(double)
        monkeypatch.setattr(gmm_step, "ENABLED", False)
        fixed_gaussian_output(case)
    assert seen.kernels() == ["fixed_gaussian_torch"] * 4
    reasons = [call.declined["fixed_gaussian_c"][0] for call in seen.calls]
    assert "2 queries" in reasons[0] and "gradients" in reasons[1]
    assert "float64" in reasons[2] and "not built" in reasons[3]
