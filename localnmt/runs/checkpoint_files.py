"""Checkpoints that survive a kill or a full disk, and a resume that survives a damaged one.

fairseq writes a new checkpoint to ``<name>.tmp`` and renames it (without flushing it to
disk first), then *copies* it, in place, to ``checkpoint_last.pt`` and ``checkpoint_best.pt``.
A kill or a full disk during that copy leaves a truncated ``checkpoint_last.pt``, and every
later run of the same command fails on it. :func:`install` (called by the training entry
point, :mod:`localnmt.runs.fairseq_entry`) makes every file the trainer writes go to a
temporary sibling, flushed to disk, then renamed onto its name: the copies too.

:func:`resume_arguments` is what the entry point adds before fairseq starts: when the
checkpoint fairseq would resume from cannot be loaded, the newest loadable one of the save
directory (``--restore-file``): the one trained for the most updates (read from each file;
the modification date only breaks ties, as copies and ``touch`` change it), said in one line
with how far behind the most trained checkpoint known (by its contents or its
``checkpoint_E_U.pt`` name) it is. A loss of more than :data:`LARGE_LOSS` of those updates
(starting afresh when nothing loads) is refused unless ``--accept-lost-updates`` is given.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localnmt import provenance
from localnmt.atomic import fsync_path, temporary_sibling
from localnmt.errors import CheckpointError
from localnmt.provenance import updates
from localnmt.safe_load import load_checkpoint

LAST = "checkpoint_last.pt"
#: the option that accepts resuming with a large loss of updates (popped by the entry point)
ACCEPT_LOSS = "--accept-lost-updates"
#: the share of the known updates a fallback may lose without ``--accept-lost-updates``
LARGE_LOSS = 0.1
_UPDATE_NAME = re.compile(r"^checkpoint_\d+_(\d+)\.pt$")


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
    """fairseq's ``torch_persistent_save`` writing through a flushed temporary sibling, the
    state stamped with its provenance (:func:`localnmt.provenance.stamp`)."""

    def persistent_save(obj, filename, async_write: bool = False) -> None:
        path = Path(filename)
        provenance.stamp(obj)  # the data-bin's digests, checked by every later use
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


@dataclass(frozen=True)
class Candidate:
    """A checkpoint of a save directory: its updates (None: damaged or not recorded)."""

    path: Path
    updates: int | None
    loads: bool

    @property
    def named_updates(self) -> int | None:
        """The updates its ``checkpoint_E_U.pt`` name says (None for other names)."""
        match = _UPDATE_NAME.match(self.path.name)
        return int(match.group(1)) if match else None


def damage(path: Path) -> str | None:
    """Why ``path`` cannot be resumed from (one line), or None when it loads."""
    try:
        load_checkpoint(path, mmap=True)
    except CheckpointError as err:
        return str(err)
    return None


def survey(save_dir: Path, exclude: Path) -> list[Candidate]:
    """Every checkpoint of ``save_dir`` but ``exclude``, most trained first (updates read from
    the file; the modification date breaks ties); those that do not load last."""
    found = []
    for path in Path(save_dir).glob("checkpoint*.pt"):
        if path.name.startswith(".") or path.resolve() == exclude.resolve():
            continue
        try:
            state = load_checkpoint(path, mmap=True)
        except CheckpointError:
            found.append(Candidate(path, None, False))
            continue
        stored = updates(state)  # a bare state (no training history): its name says
        found.append(Candidate(path, stored, True) if stored is not None else
                     Candidate(path, Candidate(path, None, True).named_updates, True))  # fmt: skip
        del state
    return sorted(found, key=lambda c: (c.loads, c.updates or 0, c.path.stat().st_mtime_ns),
                  reverse=True)  # fmt: skip


def newest_loadable(save_dir: Path, exclude: Path) -> Path | None:
    """The most trained loadable checkpoint of ``save_dir`` other than ``exclude``."""
    best = next((c for c in survey(save_dir, exclude) if c.loads), None)
    return best.path if best else None


def most_known(found: list[Candidate]) -> tuple[int, Path] | None:
    """The most updates any checkpoint is known to hold (by its contents, or by its
    ``checkpoint_E_U.pt`` name when it does not load), and that checkpoint."""
    known = [(n, c.path) for c in found if (n := c.updates if c.loads else c.named_updates)]
    return max(known, key=lambda k: k[0]) if known else None


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def _loss(why: str, chosen: Candidate | None, best: tuple[int, Path] | None,
          accept: bool) -> str:  # fmt: skip
    """How far behind ``best`` resuming from ``chosen`` (None: afresh) is; a
    :class:`CheckpointError` when that is a large loss and it was not accepted."""
    have = (chosen.updates or 0) if chosen else 0
    if best is None or best[0] <= have:
        return "no update lost" if chosen else "no checkpoint of the run is known to hold updates"
    lost = best[0] - have
    behind = f"{lost} updates behind {best[1]} ({best[0]} updates)"
    if lost > LARGE_LOSS * best[0] and not accept:
        where = f"the most trained checkpoint that loads, {chosen.path}, is" if chosen else (
            "no other checkpoint loads: starting afresh would be")  # fmt: skip
        raise CheckpointError(
            f"{why}; {where} {behind}; restore the newer file, or give {ACCEPT_LOSS} to "
            "resume from what loads"
        )
    return behind


def resume_arguments(argv: list[str], log: Callable[[str], None],
                     accept_loss: bool = False) -> list[str]:  # fmt: skip
    """fairseq-train arguments that resume from a loadable checkpoint: none when the one
    fairseq would take loads (or there is none); else ``--restore-file`` of the most trained
    loadable one (or of a missing file, to start afresh), after saying so and how many
    updates that loses. A ``--restore-file`` the user gave that does not load, and a large
    loss not accepted (``accept_loss``), are a :class:`CheckpointError` (one line)."""
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
    found = survey(save_dir, path)
    chosen = next((c for c in found if c.loads), None)
    behind = _loss(why, chosen, most_known(found), accept_loss)
    if chosen is not None:
        log(f"{why}; resuming from {chosen.path} ({chosen.updates} updates; {behind}) instead, "
            "the most trained checkpoint that loads")  # fmt: skip
        return ["--restore-file", str(chosen.path)]
    log(f"{why}; no other checkpoint in {save_dir} loads ({behind}): training starts from the "
        "beginning")  # fmt: skip
    return ["--restore-file", str(save_dir / ".no-checkpoint-to-resume.pt")]
