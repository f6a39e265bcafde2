"""Average the parameters of the last N fairseq checkpoints (by epoch or by update).

Our own version of fairseq's ``scripts/average_checkpoints.py`` (not shipped in the wheels)::

    python -m localnmt.runs.average_checkpoints --inputs CKPT_DIR \
        --num-epoch-checkpoints 5 --output CKPT_DIR/checkpoint_avg5.pt
    python -m localnmt.runs.average_checkpoints --inputs CKPT_DIR \
        --num-update-checkpoints 5 --output avg.pt
    python -m localnmt.runs.average_checkpoints --inputs a.pt b.pt --output avg.pt
"""

from __future__ import annotations

import argparse
import collections
import re
from collections.abc import Callable
from pathlib import Path

import torch

from localnmt.errors import UsageError, entry_point
from localnmt.safe_load import CheckpointError, load_checkpoint

EPOCH_PATTERN = re.compile(r"^checkpoint(\d+)\.pt$")
UPDATE_PATTERN = re.compile(r"^checkpoint_\d+_(\d+)\.pt$")


def last_n_checkpoints(
    directory: Path, n: int, by_update: bool = False, upper_bound: int | None = None
) -> list[Path]:
    """The ``n`` newest epoch (``checkpointE.pt``) or update (``checkpoint_E_U.pt``) files."""
    pattern = UPDATE_PATTERN if by_update else EPOCH_PATTERN
    found: list[tuple[int, Path]] = []
    for path in Path(directory).iterdir():
        match = pattern.match(path.name)
        if match and (upper_bound is None or int(match.group(1)) <= upper_bound):
            found.append((int(match.group(1)), path))
    if len(found) < n:
        kind = "update" if by_update else "epoch"
        raise ValueError(f"found {len(found)} {kind} checkpoints in {directory}, need {n}")
    return [path for _, path in sorted(found, reverse=True)[:n]]


def same_run(first: Path, first_state: dict, other: Path, state: dict) -> None:
    """Two checkpoints worth averaging: the same dictionaries (their digests, where recorded)
    and the same model settings; else a :class:`CheckpointError` naming both."""
    from localnmt.provenance import same_origin
    from localnmt.runs.model_fit import differences, model_config

    same_origin(first, first_state, other, state)
    held, asked = model_config(state), model_config(first_state)
    if held is not None and asked is not None and (found := differences(held, asked)):
        found = [f.replace("(asked: ", f"({first.name}: ") for f in found]
        raise CheckpointError(f"{other} was trained with other model settings than {first}: "
                              f"{'; '.join(found)}; average checkpoints of one run")  # fmt: skip


def average_checkpoints(paths: list[Path]) -> dict:
    """Return the newest (first) checkpoint's state with ``model`` replaced by the mean.

    Half-precision tensors are averaged in float32; integer buffers use floor division,
    as in fairseq's script. All checkpoints must have the same parameter names, dictionaries
    and model settings (:func:`same_run`).
    """
    if not paths:
        raise ValueError("no checkpoints to average")
    new_state: dict | None = None
    sums: collections.OrderedDict[str, torch.Tensor] = collections.OrderedDict()
    keys: list[str] | None = None
    for path in paths:
        state = load_checkpoint(path)  # weights only: a crafted pickle is refused, not run
        if new_state is None:
            new_state = state
        else:
            same_run(paths[0], new_state, path, state)
        params = state.get("model")
        if not isinstance(params, dict):
            raise CheckpointError(f"{path} holds no model parameters (not a fairseq checkpoint?)")
        if keys is None:
            keys = list(params.keys())
        elif keys != list(params.keys()):
            raise CheckpointError(f"{path} has different parameters than {paths[0]}")
        for key in keys:
            value = params[key]
            if value.dtype in (torch.float16, torch.bfloat16):
                value = value.float()
            sums[key] = value.clone() if key not in sums else sums[key] + value
    averaged: collections.OrderedDict[str, torch.Tensor] = collections.OrderedDict()
    for key, total in sums.items():
        if total.is_floating_point():
            averaged[key] = total / len(paths)
        else:
            averaged[key] = total // len(paths)
    assert new_state is not None
    new_state["model"] = averaged
    return new_state


def write_average(paths: list[Path], out: Path) -> Path:
    """:func:`average_checkpoints` of ``paths`` saved to ``out``, which appears only once the
    whole file is written (an interrupted save leaves no truncated checkpoint behind)."""
    from localnmt.atomic import atomic_path

    state = average_checkpoints(paths)
    with atomic_path(out) as tmp:
        torch.save(state, tmp)
    return Path(out)


def average_last(
    directory: Path, n: int, by_update: bool, out: Path, log: Callable[[str], None] | None = None
) -> Path:
    """:func:`write_average` of the last ``n`` checkpoints of ``directory`` (by update or by
    epoch) to ``out``, their names said to ``log``; a ValueError when there are fewer."""
    paths = last_n_checkpoints(directory, n, by_update=by_update)
    if log is not None:
        log(f"  averaging {', '.join(p.name for p in paths)}")
    return write_average(paths, out)


@entry_point("python -m localnmt.runs.average_checkpoints")
def main(argv: list[str] | None = None) -> None:
    """CLI compatible with fairseq's scripts/average_checkpoints.py; a missing, damaged or
    refused checkpoint is one message naming it, exit 2."""
    parser = argparse.ArgumentParser(description="Average fairseq checkpoints.")
    parser.add_argument(
        "--inputs",
        nargs="+",
        required=True,
        help="checkpoint files, or one directory with --num-*-checkpoints",
    )
    parser.add_argument("--output", required=True)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--num-epoch-checkpoints", type=int)
    group.add_argument("--num-update-checkpoints", type=int)
    parser.add_argument("--checkpoint-upper-bound", type=int)
    args = parser.parse_args(argv)
    n = args.num_epoch_checkpoints or args.num_update_checkpoints
    if n:
        if len(args.inputs) != 1:
            raise UsageError("--num-*-checkpoints needs exactly one input directory")
        try:
            paths = last_n_checkpoints(
                Path(args.inputs[0]),
                n,
                by_update=bool(args.num_update_checkpoints),
                upper_bound=args.checkpoint_upper_bound,
            )
        except (OSError, ValueError) as err:
            raise UsageError(str(err)) from None
    else:
        paths = [Path(p) for p in args.inputs]
    print("averaging:", " ".join(str(p) for p in paths))
    try:
        write_average(paths, Path(args.output))
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
