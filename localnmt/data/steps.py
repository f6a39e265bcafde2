"""Resumable steps: atomic outputs, done-markers keyed by a parameter fingerprint."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

Log = Callable[[str], None]


class DataError(RuntimeError):
    """A problem with input data or configuration, reported as one clear message."""


def run_data_command(build: Callable[[], Path | None]) -> int:
    """The ending every data-preparation command shares: run ``build``; print the path it
    made (exit 0), or a :class:`DataError` or a file-system error (full disk, read-only, ...)
    as one ``error:`` line (exit 2)."""
    from localnmt.data.fs_errors import describe_os_error

    try:
        out = build()
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {describe_os_error(e)}", file=sys.stderr)
        return 2
    if out is not None:
        print(out)
    return 0


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling path; rename it onto ``path`` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    elif tmp.exists():
        tmp.unlink()
    try:
        yield tmp
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
        raise
    if tmp.is_dir() and path.is_dir():
        old = path.with_name(f".{path.name}.old{os.getpid()}")
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file for writing; rename it onto ``path`` when closed cleanly."""
    with atomic_path(path) as tmp:
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with open(tmp, mode, **kwargs) as f:
            yield f


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically."""
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.write("\n")


def fingerprint(params: Any) -> str:
    """Stable short hash of JSON-serialisable parameters."""
    blob = json.dumps(params, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class StepRunner:
    """Runs named steps once; a finished step (same fingerprint, outputs present) is skipped.

    A step's fingerprint covers its own parameters and the fingerprints of the steps it
    depends on, so changing an upstream option reruns everything downstream of it.
    """

    def __init__(self, workdir: Path, log: Log = print) -> None:
        self.workdir = Path(workdir)
        self.marker_dir = self.workdir / ".done"
        self.log = log
        self.fingerprints: dict[str, str] = {}
        self.ran: list[str] = []
        self.skipped: list[str] = []

    def _marker(self, name: str) -> Path:
        return self.marker_dir / f"{name}.json"

    def is_done(self, name: str, fp: str, outputs: list[Path]) -> bool:
        marker = self._marker(name)
        if not marker.exists():
            return False
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return False
        return info.get("fingerprint") == fp and all(Path(p).exists() for p in outputs)

    def run(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        outputs: list[Path],
        params: Any = None,
        deps: tuple[str, ...] = (),
    ) -> bool:
        """Run ``fn`` unless already done; return True if it ran."""
        fp = fingerprint({"params": params, "deps": [self.fingerprints.get(d) for d in deps]})
        self.fingerprints[name] = fp
        if self.is_done(name, fp, outputs):
            self.log(f"[skip] {name}: already done")
            self.skipped.append(name)
            return False
        self.log(f"[run ] {name} ...")
        t0 = time.monotonic()
        fn()
        dt = time.monotonic() - t0
        missing = [str(p) for p in outputs if not Path(p).exists()]
        if missing:
            raise DataError(f"step {name} finished without writing {', '.join(missing)}")
        write_json(
            self._marker(name),
            {
                "fingerprint": fp,
                "params": params,
                "seconds": round(dt, 2),
                "outputs": [
                    str(Path(p).relative_to(self.workdir))
                    if Path(p).is_relative_to(self.workdir)
                    else str(p)
                    for p in outputs
                ],
            },
        )
        self.log(f"[done] {name} ({dt:.1f}s)")
        self.ran.append(name)
        return True
