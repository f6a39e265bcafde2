"""The C kernels' threads: built with OpenMP they run on torch's own OpenMP team (csrc/builds.h),
split by sentences, so the numbers do not depend on the thread count."""

from __future__ import annotations

import os

import pytest
import torch
from helpers.attention import GMM_APPROX_SPECS, make_attention

from localnmt.attention.fast import native
from localnmt.attention.fast.native import c_band, c_gmm_mixture

needs_team = pytest.mark.skipif(
    not (c_band.TEAM and c_gmm_mixture.TEAM), reason="the C kernels were built without OpenMP"
)


def test_kernels_split_on_torchs_threads_where_bound_to_its_openmp_runtime():
    """Where torch's OpenMP runtime is a plain ``libgomp.so.1`` (this machine's torch), the
    extensions bind to it and split their sentences among its threads."""
    runtime = native.torch_openmp_runtime()
    library = c_band._band.team_library() if c_band._band is not None else None
    if runtime is None or library is None:
        pytest.skip(f"no OpenMP runtime of torch found ({runtime}) or built without ({library})")
    same = os.path.realpath(library) == runtime
    assert c_band.TEAM == c_gmm_mixture.TEAM == same
    if runtime.endswith("/libgomp.so.1"):
        assert same


def test_another_openmp_runtime_keeps_the_pool(monkeypatch):
    """Bound to another runtime than torch's, or where torch's cannot be told: no team."""

    class Bound:
        def team_library(self):
            return "/elsewhere/libgomp.so.1"

    monkeypatch.setattr(native, "torch_openmp_runtime", lambda: "/torch/lib/libgomp.so.1")
    assert not native.splits_itself(Bound())
    monkeypatch.setattr(native, "torch_openmp_runtime", lambda: None)
    assert not native.splits_itself(Bound())
    assert not native.splits_itself(None)
    monkeypatch.setattr(native, "torch_openmp_runtime", lambda: "/elsewhere/libgomp.so.1")
    assert native.splits_itself(Bound())


@needs_team
@pytest.mark.parametrize("spec", GMM_APPROX_SPECS[:2])
def test_gmm_mixture_same_numbers_on_one_and_three_threads(spec, monkeypatch):
    """The C mixture (eq. 6 and 10-14, forward and backward) splits sentences among torch's
    threads: bit for bit the same values and gradients with one thread, with three, and with
    three of the wrappers' own pool (the kernel then runs each call on one thread)."""
    mod = make_attention("cross", spec, embed_dim=16, heads=4).modifiers[0]
    layout = mod._step_layout
    batch, heads, tq, tk = 7, 4, 5, 9
    torch.manual_seed(0)
    raw = (torch.randn(batch, heads, tq, mod.predictors.out_weight.size(0)) * 2).requires_grad_()
    length = torch.tensor([9.0, 6, 9, 3, 9, 9, 8]).view(batch, 1, 1, 1).expand(batch, 1, tq, 1)
    positions = (torch.arange(tk, dtype=torch.float32) + 0.5).expand(batch, tk).contiguous()
    real = torch.arange(tk) < length[:, 0, 0, :]
    alpha = torch.softmax(torch.randn(batch, heads, tq, tk), -1).requires_grad_()
    grad = torch.randn(batch, heads, tq, tk)
    before = torch.get_num_threads()
    results = []
    try:
        for threads, team in ((1, True), (3, True), (3, False)):  # (3, False): the own pool
            torch.set_num_threads(threads)
            c_gmm_mixture._gmm_mixture.use_team(team)
            monkeypatch.setattr(c_gmm_mixture, "TEAM", team)
            shape = (batch, heads, tq, tk)
            out = c_gmm_mixture.approx_gated_mixture(
                layout, raw, length, positions, real, shape, None, alpha
            )
            assert out is not None
            results.append((out, *torch.autograd.grad(out, [raw, alpha], grad)))
    finally:
        torch.set_num_threads(before)
        c_gmm_mixture._gmm_mixture.use_team(True)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b)
