"""Zero gradients for what a layer's output does not depend on, in distributed training
(:mod:`localnmt.attention.unused`): the hard-coded Gaussian and GMM with ``fusion=gmm`` leave
the logits out of the output, and ``DistributedDataParallel`` without
``find_unused_parameters`` stops at their parameters' missing gradients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from localnmt.attention.layers import LocalCrossAttention
from localnmt.attention.unused import distributed_training, keep_in_graph

WORKER = Path(__file__).parents[1] / "helpers" / "ddp_unused_worker.py"


def test_keep_in_graph_changes_nothing_but_gives_zero_gradients() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    unused = torch.randn(5, requires_grad=True)
    frozen = torch.randn(2)
    plain = (x * 2).sin()
    linked = keep_in_graph((x * 2).sin(), [unused, frozen, None])
    assert torch.equal(plain, linked)
    (grad_plain,) = torch.autograd.grad(plain.sum(), [x])
    grad_x, grad_unused = torch.autograd.grad(linked.sum(), [x, unused])
    assert torch.equal(grad_plain, grad_x)
    assert torch.equal(grad_unused, torch.zeros(5))
    with torch.no_grad():
        assert keep_in_graph(plain, [unused]) is plain


@pytest.mark.parametrize(
    ("spec", "discards"),
    [("hardcoded_gaussian", True), ("gmm[fusion=gmm]", True), ("gmm", False),
     ("gmm[fusion=average]", False), ("localness", False)],
)  # fmt: skip
def test_which_methods_discard_the_logits(spec: str, discards: bool) -> None:
    layer = LocalCrossAttention(16, 4, spec)
    assert layer.attention._discards_logits() is discards


def test_a_single_process_leaves_the_unused_projections_without_gradients() -> None:
    """No process group: nothing is linked (the optimiser skips them, as before)."""
    assert not distributed_training()
    layer = LocalCrossAttention(16, 4, "hardcoded_gaussian").train()
    layer(torch.randn(2, 3, 16), torch.randn(2, 5, 16)).sum().backward()
    assert layer.attention.q_proj.weight.grad is None
    assert layer.attention.k_proj.weight.grad is None
    assert layer.attention.v_proj.weight.grad is not None


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("ddp") / "results.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", "2", str(WORKER), str(out)]  # fmt: skip
    root = Path(__file__).parents[2]
    path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", ["plain", "fairseq", "hf"])
def test_ddp_trains_without_find_unused_parameters(ddp_results: dict, case: str) -> None:
    """Two gloo processes, ``find_unused_parameters=False``, three updates: the plain module
    (hard-coded Gaussian + rel_pos), the fairseq plugin's ``zhang2021_hardcoded_base`` and a
    transformers Marian model with ``gmm[fusion=gmm] + localness`` in cross-attention. The
    gradients DDP averages equal a single process's on both ranks' batches for every
    parameter the output depends on (to float32 rounding: the ranks' sum is gloo's), and are
    exact zeros for the others."""
    result = ddp_results[case]
    if "skipped" in result:
        pytest.skip(result["skipped"])
    assert result["zero"] > 0 and result["used"] > 0
    assert result["max_diff"] < 1e-6
