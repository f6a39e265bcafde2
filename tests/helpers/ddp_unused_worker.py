"""Run by ``torch.distributed.run`` (2 processes, gloo) from ``tests/attention/test_unused.py``:
models whose methods discard the logits train under ``DistributedDataParallel`` without
``find_unused_parameters``, and rank 0 compares the gradients with a single-process
computation of both ranks' batches. Writes ``{case: {...}}`` as JSON to ``argv[1]``."""

from __future__ import annotations

import copy
import gc
import json
import sys
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import Tensor, nn

STEPS = 3


def plain_case() -> tuple[nn.Module, Callable[[nn.Module, int], Tensor]]:
    from localnmt.attention.layers import LocalCrossAttention

    torch.manual_seed(0)
    model = LocalCrossAttention(16, 4, "hardcoded_gaussian + rel_pos[clip=2]")

    def loss(m: nn.Module, seed: int) -> Tensor:
        gen = torch.Generator().manual_seed(seed)
        x, memory = torch.randn(3, 5, 16, generator=gen), torch.randn(3, 7, 16, generator=gen)
        return m(x, memory).pow(2).mean()

    return model, loss


def fairseq_case() -> tuple[nn.Module, Callable[[nn.Module, int], Tensor]]:
    from bench.models import build_candidate, parse_model_args, size_overrides
    from bench.synthetic import make_batch, make_dictionary

    dictionary = make_dictionary(60)
    ns = parse_model_args("zhang2021_hardcoded_base", ["--encoder-layers", "2",
                          "--decoder-layers", "2", "--dropout", "0"],
                          size_overrides(16, 32), quiet=True)  # fmt: skip
    torch.manual_seed(0)
    model = build_candidate(ns, dictionary)

    def loss(m: nn.Module, seed: int) -> Tensor:
        b = make_batch(dictionary, 3, 6, seed=seed)
        logits = m(b.src_tokens, b.src_lengths, b.prev_output_tokens)[0]
        return nn.functional.cross_entropy(logits.flatten(0, 1), b.target.flatten())

    return model, loss


def hf_case() -> tuple[nn.Module, Callable[[nn.Module, int], Tensor]]:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "hf"))
    from hf_models import tiny_model

    import localnmt.hf

    model = localnmt.hf.apply(tiny_model("marian"), cross="gmm[k=2,fusion=gmm] + localness")

    def loss(m: nn.Module, seed: int) -> Tensor:
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(3, 40, (3, 7), generator=gen)
        labels = torch.randint(3, 40, (3, 5), generator=gen)
        return m(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss

    return model, loss


CASES = {"plain": plain_case, "fairseq": fairseq_case, "hf": hf_case}


def run(case: str) -> dict:
    rank = dist.get_rank()
    try:
        model, loss = CASES[case]()
    except ImportError as error:  # transformers not installed: the test skips this case
        return {"skipped": str(error)}
    model.train()
    reference = copy.deepcopy(model)
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=False)
    for step in range(STEPS):
        ddp.zero_grad(set_to_none=True)
        loss(ddp, 100 * step + rank).backward()  # a second step fails if DDP misses a grad
    # both ranks' last batches in one process, without a process group's links
    reference.zero_grad(set_to_none=True)
    ((loss_on(reference, loss, 100 * (STEPS - 1)) + loss_on(reference, loss, 100 * (STEPS - 1) + 1))
     / 2).backward()  # fmt: skip
    used, zero, differ = 0, 0, 0.0
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if not p.requires_grad:  # Marian's sinusoidal positions
            continue
        if q.grad is None:  # no gradient in one process: DDP's must be an exact zero
            assert p.grad is not None and not p.grad.any(), name
            zero += 1
        else:
            used += 1
            differ = max(differ, float((p.grad - q.grad).abs().max()))
    return {"used": used, "zero": zero, "max_diff": differ}


def loss_on(model: nn.Module, loss: Callable[[nn.Module, int], Tensor], seed: int) -> Tensor:
    """``loss`` of ``model`` outside the process group's reach: its layers see no group of
    more than one process (:func:`localnmt.attention.unused.distributed_training`)."""
    from unittest import mock

    with mock.patch("localnmt.attention.pipeline.distributed_training", return_value=False):
        return loss(model, seed)


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    results = {case: run(case) for case in CASES}
    if dist.get_rank() == 0:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            json.dump(results, f)
    # the cases' DistributedDataParallel wrappers sit in reference cycles: collected now, their
    # Reducers do not hold the group's last reference when it is destroyed (which could
    # deadlock on the GIL: localnmt.hf.example.leave_process_group)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
