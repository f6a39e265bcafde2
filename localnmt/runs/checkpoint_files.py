"""Checkpoints that survive a kill or a full disk, and a resume that survives a damaged one.

fairseq writes a new checkpoint to ``<name>.tmp`` and renames it (without flushing it to
disk first), then *copies* it, in place, to ``checkpoint_last.pt`` and ``checkpoint_best.pt``.
A kill or a full disk during that copy leaves a truncated ``checkpoint_last.pt``, and every
later run of the same command fails on it. :func:`install` (called by the training entry
point, :mod:`localnmt.runs.fairseq_entry`) makes every file the trainer writes go to a
temporary sibling, flushed to disk, then renamed onto its name: the copies too.

:func:`resume_arguments` is what the entry point adds before fairseq starts: when the
checkpoint fairseq would resume from cannot be loaded, the newest loadable one of the save
directory (``--restore-file``), said in one line; with none, training starts afresh, said too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from localnmt.atomic import fsync_path, temporary_sibling
from localnmt.errors import CheckpointError
from localnmt.safe_load import load_checkpoint

LAST = "checkpoint_last.pt"


def atomic_copy(src: str, dst: str, overwrite: bool = True) -> bool:
    """Copy ``src`` to ``dst`` through a flushed temporary sibling and a rename."""
    dst_path = Path(dst)
    if dst_path.exists() and not overwrite:
        return False
    tmp = temporary_sibling(dst_path)
    try:
        shutil.copyfile(src, tmp)
        fsync_path(tmp)
        os.replace(tmp, dst_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True


def atomic_torch_save(save: Callable[[object, object], None]) -> Callable[..., None]:
    """fairseq's ``torch_persistent_save`` writing through a flushed temporary sibling."""

    def persistent_save(obj, filename, async_write: bool = False) -> None:
        path = Path(filename)
        tmp = temporary_sibling(path)
        try:
            with open(tmp, "wb") as f:
                save(obj, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    return persistent_save


def install() -> None:
    """Patch fairseq's checkpoint writing (in the training process, before it starts)."""
    from fairseq import checkpoint_utils

    checkpoint_utils.torch_persistent_save = atomic_torch_save(
        checkpoint_utils._torch_persistent_save
    )

    class _AtomicCopies:
        """fairseq's PathManager with copies made atomic (everything else unchanged)."""

        def __getattr__(self, name):
            from fairseq.file_io import PathManager

            return getattr(PathManager, name)

        @staticmethod
        def copy(src: str, dst: str, overwrite: bool = False) -> bool:
            return atomic_copy(src, dst, overwrite)

    checkpoint_utils.PathManager = _AtomicCopies()


def damage(path: Path) -> str | None:
    """Why ``path`` cannot be resumed from (one line), or None when it loads."""
    try:
        load_checkpoint(path, mmap=True)
    except CheckpointError as err:
        return str(err)
    return None


def newest_loadable(save_dir: Path, exclude: Path) -> Path | None:
    """The most recently written loadable checkpoint of ``save_dir`` other than ``exclude``."""
    candidates = [p for p in Path(save_dir).glob("checkpoint*.pt")
                  if p.resolve() != exclude.resolve() and not p.name.startswith(".")]  # fmt: skip
    for path in sorted(candidates, key=lambda p: p.stat().st_mtime_ns, reverse=True):
        if damage(path) is None:
            return path
    return None


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def resume_arguments(argv: list[str], log: Callable[[str], None]) -> list[str]:
    """fairseq-train arguments that resume from a loadable checkpoint: none when the one
    fairseq would take loads (or there is none); else ``--restore-file`` of the newest
    loadable one (or of a missing file, to start afresh), after saying so. A ``--restore-file``
    the user gave that does not load is a :class:`CheckpointError` (one line)."""
    save_dir = Path(_option(argv, "--save-dir", "checkpoints"))
    restore = _option(argv, "--restore-file", LAST)
    path = save_dir / restore if restore == LAST else Path(restore)
    if not path.is_file():
        return []
    why = damage(path)
    if why is None:
        return []
    if restore != LAST:
        raise CheckpointError(f"--restore-file: {why}")
    fallback = newest_loadable(save_dir, path)
    if fallback is not None:
        log(f"{why}; resuming from {fallback} instead, the newest checkpoint that loads")
        return ["--restore-file", str(fallback)]
    log(f"{why}; no other checkpoint in {save_dir} loads: training starts from the beginning")
    return ["--restore-file", str(save_dir / ".no-checkpoint-to-resume.pt")]
