"""The C kernels' threads: built with OpenMP they run on torch's own OpenMP team (csrc/builds.h),
split by sentences, so the numbers do not depend on the thread count."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig

import pytest
import torch
from helpers.attention import GMM_APPROX_SPECS, make_attention

from localnmt.attention.fast.native import c_band, c_gmm_mixture

needs_team = pytest.mark.skipif(
    not (c_band.TEAM and c_gmm_mixture.TEAM), reason="the C kernels were built without OpenMP"
)

_MAPPED = """
import json, torch
from localnmt.attention.fast.native import c_band, c_gmm_mixture, gmm_step
names = set()
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if "libgomp" in path or "libiomp" in path:
        names.add(path)
print(json.dumps({"runtimes": sorted(names), "team": [c_band.TEAM, c_gmm_mixture.TEAM]}))
"""


@needs_team
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_kernels_bind_to_the_openmp_runtime_torch_loaded():
    """One OpenMP runtime in the process: the extensions' libgomp.so.1 is torch's (a second
    runtime would bring a second set of threads beside torch's spinning ones)."""
    found = json.loads(subprocess.run([sys.executable, "-c", _MAPPED], check=True,
                                      capture_output=True, text=True).stdout)  # fmt: skip
    torch_runtimes = [p for p in found["runtimes"] if "torch" in p]
    if not any(p.endswith("/libgomp.so.1") for p in torch_runtimes):
        pytest.skip(f"torch's OpenMP runtime is not a plain libgomp.so.1: {torch_runtimes}")
    assert found["team"] == [True, True]
    assert len(found["runtimes"]) == 1, found["runtimes"]
    assert sysconfig.get_platform().startswith("linux")


@needs_team
@pytest.mark.parametrize("spec", GMM_APPROX_SPECS[:2])
def test_gmm_mixture_same_numbers_on_one_and_three_threads(spec):
    """The C mixture (eq. 6 and 10-14, forward and backward) splits sentences among torch's
    threads: bit for bit the same values and gradients with one thread and with three."""
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
        for threads in (1, 3):
            torch.set_num_threads(threads)
            shape = (batch, heads, tq, tk)
            out = c_gmm_mixture.approx_gated_mixture(
                layout, raw, length, positions, real, shape, None, alpha
            )
            assert out is not None
            results.append((out, *torch.autograd.grad(out, [raw, alpha], grad)))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
