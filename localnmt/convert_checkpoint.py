"""Load a checkpoint of fairseq's own ``transformer`` into a localnmt architecture.

``python -m localnmt.convert_checkpoint IN.pt OUT.pt --arch localnmt_base [--set KEY=VALUE]``

The parameters are untouched (our attention has fairseq's parameter names), only the recorded
architecture changes; the result loads with ``fairseq-generate --user-dir $(localnmt-path)``
and, with no attention spec, translates exactly as the original.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from localnmt.errors import UsageError, entry_point
from localnmt.safe_load import CheckpointError, load_checkpoint


def _set(ns: Any, key: str, value: Any) -> None:
    if isinstance(ns, dict):
        ns[key] = value
    else:
        setattr(ns, key, value)


def convert(src: Path, dst: Path, arch: str, overrides: dict[str, str] | None = None) -> None:
    """Rewrite the architecture (and optional model args) recorded in a fairseq checkpoint."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    if arch not in ARCH_MODEL_REGISTRY:
        raise UsageError(f"unknown --arch '{arch}'")
    state = load_checkpoint(src)  # weights only: a crafted pickle is refused, not run
    targets = []
    if state.get("args") is not None:
        targets.append(state["args"])
    if state.get("cfg") is not None and state["cfg"].get("model") is not None:
        targets.append(state["cfg"]["model"])
    if not targets:
        raise CheckpointError(f"{src} holds no model configuration (not a fairseq checkpoint?)")
    for ns in targets:
        _set(ns, "arch", arch)
        _set(ns, "_name", arch)
        for key, value in (overrides or {}).items():
            _set(ns, key, value)
    tmp = dst.with_suffix(dst.suffix + ".tmp")
    torch.save(state, tmp)
    tmp.replace(dst)


@entry_point("python -m localnmt.convert_checkpoint")
def main(argv: list[str] | None = None) -> None:
    """Command line: convert, or one message naming the file and exit 2."""
    parser = argparse.ArgumentParser(prog="python -m localnmt.convert_checkpoint")
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--arch", default="localnmt_base")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="also set a model argument, e.g. encoder_attn_modifiers='localness[layers=1-3]'",
    )  # fmt: skip
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        if "=" not in item:
            parser.error(f"--set expects KEY=VALUE, got '{item}'")
        key, value = item.split("=", 1)
        overrides[key.replace("-", "_")] = value
    try:
        convert(args.src, args.dst, args.arch, overrides)
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    print(f"wrote {args.dst} (arch {args.arch})")


if __name__ == "__main__":
    main()
