"""Before fairseq-train loads a checkpoint: is it this run's, and does it fit?

A resume (``checkpoint_last.pt`` of the save directory, or the fallback
:mod:`localnmt.runs.checkpoint_files` picks) continues the same run: its dictionaries must be
the data-bin's (:mod:`localnmt.provenance`) and every model setting must be the one asked for
(:mod:`localnmt.runs.model_fit`); otherwise it is refused in one line naming the differences,
and ``--start-over`` (of ``localnmt-train`` and of the entry point) moves the old checkpoints
aside, to ``SAVE_DIR/stale/<date>/``, never deleting them. Weights taken on purpose from
another run (``--restore-file``, ``--finetune-from-model``) need the data-bin's dictionaries
and the same parameter shapes only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from localnmt import provenance
from localnmt.runs import checkpoint_files, model_fit
from localnmt.safe_load import load_checkpoint

#: the option that sets the save directory's checkpoints aside and trains afresh
START_OVER = "--start-over"

Note = Callable[[str], None] | None


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    return checkpoint_files._option(argv, name, default)


def restore_target(argv: list[str]) -> tuple[Path, bool] | None:
    """The checkpoint fairseq-train will load (as fairseq's ``load_checkpoint`` decides), and
    whether that continues this save directory's run (a resume); None when it starts
    afresh."""
    save_dir = Path(_option(argv, "--save-dir", "checkpoints"))
    restore = _option(argv, "--restore-file", checkpoint_files.LAST)
    if restore == checkpoint_files.LAST:
        last = save_dir / checkpoint_files.LAST
        if last.is_file():
            return last, True
        finetune = _option(argv, "--finetune-from-model")
        return (Path(finetune), False) if finetune and Path(finetune).is_file() else None
    path = Path(restore)
    if not path.is_file():
        return None
    return path, path.resolve().parent == save_dir.resolve()


def check_start(argv: list[str], note: Note = provenance.note_to_stderr) -> None:
    """Refuse (one line) a checkpoint to be loaded that another data-bin's dictionaries
    trained, whose vocabulary sizes differ from the data-bin's, or (a resume) whose model
    settings differ from those asked for, (other weights) whose parameter shapes do."""
    target = restore_target(argv)
    if target is None:
        return
    path, resume = target
    asked = model_fit.parse_training_arguments(argv)
    if asked is None or not getattr(asked, "data", None):
        return
    state = load_checkpoint(path, mmap=True)
    data_bin = Path(str(asked.data).split(":")[0])
    model_fit.check_vocabulary(path, state, data_bin, getattr(asked, "source_lang", None),
                               getattr(asked, "target_lang", None))  # fmt: skip
    provenance.check_data_bin(path, state, data_bin, note=note)
    save_dir = _option(argv, "--save-dir", "checkpoints")
    remedy = (f"train with the settings it was trained with, or give {START_OVER} to move "
              f"the checkpoints of {save_dir} to {save_dir}/stale/ and train afresh"
              if resume else "give a checkpoint of a model of these dimensions")  # fmt: skip
    model_fit.check_settings(path, state, asked, shapes_only=not resume, remedy=remedy)


def preflight(argv: list[str], accept_loss: bool = False) -> None:
    """What the entry point would refuse, found before a launcher starts it (no notes:
    the entry point says them)."""
    extra = checkpoint_files.resume_arguments(argv, lambda m: None, accept_loss)
    check_start([*argv, *extra], note=None)


def start_over(save_dir: Path) -> Path | None:
    """Move the checkpoints of ``save_dir`` (and its learning curve) to
    ``save_dir/stale/<date>/``; returns that folder (None: nothing to move)."""
    save_dir = Path(save_dir)
    files = [p for p in save_dir.glob("checkpoint*.pt") if p.is_file()]
    files += [p for p in (save_dir / "curve.jsonl",) if p.is_file()]
    if not files:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest, n = save_dir / "stale" / stamp, 1
    while dest.exists():
        n += 1
        dest = save_dir / "stale" / f"{stamp}-{n}"
    dest.mkdir(parents=True)
    for path in files:
        os.replace(path, dest / path.name)
    return dest
