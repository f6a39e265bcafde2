"""Faults made on purpose, for the fault tests: a checkpoint whose pickle runs a command, file
writes that fail as a full or read-only disk would."""

from __future__ import annotations

import builtins
import io
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import torch


class Payload:
    """Unpickling this runs ``touch MARKER`` (what a crafted checkpoint would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def write_crafted(path: Path, marker: Path, *, legacy: bool = False) -> Path:
    """A file that looks like a fairseq checkpoint and runs ``touch marker`` when unpickled:
    in torch's zip format, or (``legacy``) a bare pickle as old ``torch.save`` wrote."""
    if legacy:  # no tensors: a bare pickle of one would name torch.storage._load_from_bytes
        with open(path, "wb") as f:
            pickle.dump({"model": {}, "args": None, "cfg": {"model": Payload(marker)}}, f, 2)
    else:
        model = {"w": torch.zeros(2)}
        torch.save({"model": model, "args": None, "cfg": {"model": Payload(marker)}}, path)
    return path


def failing_writes(monkeypatch, matches: Callable[[Path], bool], error: Callable[[Path], OSError],
                   *, after_writes: int = 0) -> None:  # fmt: skip
    """Make files whose path ``matches`` fail as a file system would: opening them for
    writing raises ``error(path)`` (``after_writes=0``), or their writes do once
    ``after_writes`` writes went through (a disk that fills up mid-file). ``os.mkdir`` of a
    matching path raises too."""
    real_open, real_mkdir = io.open, os.mkdir

    def fake_open(file, mode="r", *args, **kwargs):
        writing = any(c in mode for c in "wax+")
        if not (writing and isinstance(file, (str, os.PathLike)) and matches(Path(file))):
            return real_open(file, mode, *args, **kwargs)
        if after_writes == 0:
            raise error(Path(file))
        return _FillingUp(real_open(file, mode, *args, **kwargs), after_writes, error(Path(file)))

    def fake_mkdir(path, *args, **kwargs):
        if matches(Path(path)):
            raise error(Path(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


class _FillingUp:
    """A file whose writes fail with ``error`` after the first ``ok`` of them."""

    def __init__(self, file, ok: int, error: OSError) -> None:
        self._file, self._ok, self._error = file, ok, error

    def write(self, data):
        if self._ok <= 0:
            raise self._error
        self._ok -= 1
        return self._file.write(data)

    def __getattr__(self, name: str):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self._file.close()
        return False
