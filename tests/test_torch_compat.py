"""What needs a newer torch switches off on older ones, with a message, and computes right."""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from localnmt import torch_compat
from localnmt.attention import dispatch
from localnmt.attention.fast import flex
from localnmt.safe_load import allow_checkpoint_globals


def test_version_parsing() -> None:
    assert torch_compat.version("2.5.1+cu124") == (2, 5)
    assert torch_compat.version("2.15.0") == (2, 15)
    assert torch_compat.version("2.1.2") >= torch_compat.OLDEST
    assert torch_compat.version() >= torch_compat.OLDEST
    with pytest.raises(ValueError):
        torch_compat.version("nightly")


def test_namespace_allow_list_where_torch_has_one(monkeypatch, tmp_path) -> None:
    path = tmp_path / "ck.pt"
    torch.save({"args": argparse.Namespace(arch="x")}, path)
    if allow_checkpoint_globals():
        assert torch.load(path, weights_only=True)["args"].arch == "x"
    monkeypatch.delattr(torch.serialization, "add_safe_globals", raising=False)
    assert allow_checkpoint_globals() is False  # older torch: no error


def test_numpy_problem_names_the_fix(monkeypatch) -> None:
    assert torch_compat.numpy_problem() is None  # this install works

    def from_numpy(_array):
        raise RuntimeError("Numpy is not available")  # torch 2.1.2 with numpy 2

    monkeypatch.setattr(torch, "from_numpy", from_numpy)
    problem = torch_compat.numpy_problem()
    assert problem is not None and "Numpy is not available" in problem
    assert "pip install 'numpy<2'" in problem


def test_float32_always_multiplies_on_cpu() -> None:
    assert torch_compat.cpu_supports(torch.float32)


@pytest.mark.parametrize("real", [None, "padded"])
def test_mask_mod_masks_indices_past_the_problem(real) -> None:
    """torch 2.5's create_block_mask asks about whole blocks of 128 past the last query and
    key: those are False, and never index the padding mask (IndexError before)."""
    tq, tk, groups, bsz = 5, 7, 2, 2
    mask = None
    if real:
        mask = torch.ones(bsz, tk * groups, dtype=torch.bool)
        mask[1, :3] = False
    left, right = torch.tensor([2, 1]), torch.tensor([1, 3])
    mask_mod = flex.make_mask_mod(left, right, mask, tk, tk - tq, False, keys=tk * groups)
    q = torch.arange(128)[:, None]
    kv = torch.arange(128)[None, :]
    for b in range(bsz):
        for h in range(2):
            got = mask_mod(torch.tensor(b), torch.tensor(h), q, kv)
            assert not got[tq:].any() and not got[:, tk * groups :].any()
            inside = got[:tq, : tk * groups]
            rel = torch.arange(tk * groups)[None, :] % tk - (torch.arange(tq)[:, None] + tk - tq)
            want = (rel >= -left[h]) & (rel <= right[h])
            if mask is not None:
                want = want & mask[b][None, :]
            assert torch.equal(inside, want)


def test_score_mod_clamps_query_indices() -> None:
    a, c, s = (torch.rand(1, 1, 3) for _ in range(3))
    score_mod = flex.make_score_mod([(a, c, s)], torch.arange(4.0)[None], 4)
    got = score_mod(torch.zeros(()), torch.tensor(0), torch.tensor(0), torch.tensor(130),
                    torch.tensor(1))  # fmt: skip
    assert torch.isfinite(got)


def _cuda_problem() -> SimpleNamespace:
    """Enough of an AttentionProblem for the kernel's first checks: CUDA, with a window."""
    return SimpleNamespace(q=SimpleNamespace(device=torch.device("cuda")), bands=[object()])


def test_flex_off_on_torch_without_it_says_so_once(monkeypatch) -> None:
    monkeypatch.setattr(flex, "available", lambda: False)
    monkeypatch.setattr(flex, "_told", False)
    monkeypatch.setattr(flex, "_disabled", False)
    cpu = SimpleNamespace(q=SimpleNamespace(device=torch.device("cpu")), bands=[object()])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # declined, and on the CPU nothing to say
        assert "FlexAttention" in dispatch.joined(list(flex.check(cpu)))
    with pytest.warns(UserWarning, match=r"FlexAttention needs torch >= 2\.5"):
        assert "torch >= 2.5" in dispatch.joined(list(flex.check(_cuda_problem())))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(flex.check(_cuda_problem()))  # said once only


def test_flex_forced_on_torch_without_it_declines_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr(flex, "available", lambda: False)
    monkeypatch.setattr(flex, "_told", False)
    monkeypatch.setattr(flex, "_disabled", False)
    cpu = SimpleNamespace(q=SimpleNamespace(device=torch.device("cpu")), bands=[])
    with dispatch.forced_kernel("flex"):
        with pytest.warns(UserWarning, match=r"FlexAttention needs torch >= 2\.5"):
            # declined with the reason: bench.run reports it so
            reason = dispatch.joined(list(flex.check(cpu)))
    assert "torch >= 2.5" in reason


def test_setup_declares_the_oldest_torch() -> None:
    """setup.py's torch requirement and :data:`torch_compat.OLDEST` say the same version."""
    text = (Path(__file__).resolve().parents[1] / "setup.py").read_text()
    declared = re.search(r'TORCH_REQUIREMENT = "torch>=(\d+)\.(\d+)"', text)
    assert declared is not None
    assert (int(declared.group(1)), int(declared.group(2))) == torch_compat.OLDEST
