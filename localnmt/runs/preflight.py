"""What ``localnmt-train``, the quickstart and ``reproduce`` check before a training starts.

The data-bin (:mod:`localnmt.runs.data_bin`), the attention specs against the model's sizes
(the methods' bounds, as the model build would check them) and what the specs' options imply
in memory (:mod:`localnmt.attention.memory`) against what this machine has: each failure is
one line (:class:`~localnmt.errors.UsageError`) before any process trains.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os

from localnmt import machine
from localnmt.attention.memory import batch_pairs, gigabytes, method_memory
from localnmt.errors import UsageError
from localnmt.runs.data_bin import DataBinSummary, check_data_bin_files
from localnmt.runs.launch import fairseq_args
from localnmt.runs.run_specs import TrainSpec


def check_training(spec: TrainSpec, gpus: int) -> None:
    """Stop (:class:`UsageError`) before training ``spec`` when it asks for more CPU processes
    than cores, its data-bin is damaged, its
    attention options do not fit the model, or they cannot fit in this machine's memory."""
    cores = os.cpu_count() or 1
    if gpus == 0 and (spec.procs or 1) > cores:
        raise UsageError(
            f"--procs {spec.procs} is more than the {cores} cores of this machine: the "
            f"processes would share them and train slower than --procs {cores}; use at most "
            f"--procs {cores}"
        )
    summary = check_data_bin_files(spec.data)
    args = parsed_training_args(fairseq_args(spec, gpus))
    if args is not None:
        check_attention(args, summary, procs=spec.procs_per_node(gpus) if gpus == 0 else 0)


def parsed_training_args(argv: list[str]) -> argparse.Namespace | None:
    """fairseq-train's namespace for ``argv`` (the architecture's defaults filled in), or
    None where fairseq rejects it: fairseq-train then says why, as it always has."""
    from fairseq import options

    quiet, logger = io.StringIO(), logging.getLogger("fairseq")
    level = logger.level
    logger.setLevel(logging.WARNING)  # e.g. "--user-dir ... has already been imported"
    try:
        with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
            return options.parse_args_and_arch(options.get_training_parser(), argv)
    except SystemExit:
        return None
    finally:
        logger.setLevel(level)


def check_attention(args: argparse.Namespace, data: DataBinSummary, procs: int) -> None:
    """The specs of ``args`` against the model's sizes, then their memory for the longest
    batch the data allows against the memory available to ``procs`` training processes on
    this machine's CPU, or (``procs`` 0: one process per GPU) against the free memory of its
    GPU with the least."""
    from localnmt.attention.attention_specs import AttentionSpecs
    from localnmt.fairseq_plugin.transformer import check_site_specs, layer_sites

    given = [(kind, spec) for kind, spec in AttentionSpecs.from_namespace(args).given() if spec]
    for kind, spec in given:
        check_site_specs(args, kind, spec)
    specs = {kind: list(spec.items) for kind, spec in given}
    if not specs:
        return
    positions = max(getattr(args, "max_source_positions", 0) or 0,
                    getattr(args, "max_target_positions", 0) or 0) or 1024  # fmt: skip
    longest = min(max(data.longest.values(), default=positions), positions)
    tokens = args.max_tokens or (args.batch_size or 1) * longest
    pairs = batch_pairs(tokens, longest)
    costs = method_memory(specs, {kind: layer_sites(args, kind) for kind in specs}, pairs)
    on_gpu = procs == 0
    where = "its GPU has free" if on_gpu else "this machine has available"
    available = machine.gpu_available_memory() if on_gpu else machine.available_memory()
    need = sum(c.nbytes for c in costs) * max(procs, 1)
    if not costs or available is None or need <= available:
        return
    top = costs[0]
    each = "" if procs <= 1 else f" in each of {procs} processes"
    together = "" if len(costs) == 1 else f" (all its attention options: {gigabytes(need)})"
    raise UsageError(
        f"{top.text} at {top.kind.replace('_', '-')} attention needs at least "
        f"{gigabytes(top.nbytes)}{each} for a training batch of {tokens} tokens (sentences up "
        f"to {longest} tokens){together}, more than the {gigabytes(available)} {where}; "
        f"make the size options of {top.method} smaller, or --max-tokens"
        + (", or --procs" if procs > 1 else "")
    )
