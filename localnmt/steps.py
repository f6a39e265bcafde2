"""Resumable steps: each runs once per fingerprint, and a rerun redoes exactly what changed.

Corpus building, training, translation and scoring, in the quickstart, ``reproduce`` and
data preparation alike, are steps of a :class:`StepRunner`. A step's fingerprint covers

- its parameters (options, the fairseq arguments of a training, the decoding settings),
- the *contents* of the files it reads (``inputs``: the data-bin, the references, the
  checkpoint it translates; :mod:`localnmt.digests` hashes their bytes, cheaply on reruns),
- the fingerprints of the steps it depends on (``deps``),

and a finished step leaves a marker, ``<workdir>/.done/<name>.json``. A rerun with the same
fingerprint whose outputs are all there is skipped; any change (an option, one line of the
training data, a reference) runs the step again, and with it every step that depends on it.
The first step a runner runs makes this process the holder of the workdir
(:mod:`localnmt.locks`) for as long as the runner lives: a second process on the same workdir
stops with one message naming the first.
``docs/orchestration.md`` has the whole picture.
"""

from __future__ import annotations

import hashlib
import json
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localnmt.atomic import write_json
from localnmt.digests import content_digest
from localnmt.errors import DataError
from localnmt.locks import acquire, release

Log = Callable[[str], None]


def fingerprint(params: Any) -> str:
    """Stable short hash of JSON-serialisable parameters."""
    blob = json.dumps(params, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def input_digests(inputs: Sequence[Path | None], cache: Path | None = None) -> list[str | None]:
    """The content digest of each input, in order (None where the path is missing): what a
    fingerprint records of files, so that a moved workdir is still recognised. ``cache``:
    where digests of unchanged files are remembered (:mod:`localnmt.digests`)."""
    return [content_digest(p, cache) for p in inputs]


class StepRunner:
    """Runs named steps once; a finished step (same fingerprint, outputs present) is skipped.

    A step's fingerprint covers its own parameters, the contents of its input files and the
    fingerprints of the steps it depends on, so changing an upstream option or file reruns
    everything downstream of it.
    """

    def __init__(self, workdir: Path, log: Log = print) -> None:
        self.workdir = Path(workdir)
        self.marker_dir = self.workdir / ".done"
        self.log = log
        self.fingerprints: dict[str, str] = {}
        self.ran: list[str] = []
        self.skipped: list[str] = []
        self._holding = False

    def hold(self) -> None:
        """Make this process the holder of the workdir while this runner lives
        (:class:`~localnmt.errors.BusyError` when another live process holds it)."""
        if not self._holding:
            acquire(self.workdir)
            self._holding = True
            weakref.finalize(self, release, self.workdir)  # let go when the runner goes

    @property
    def digest_cache(self) -> Path:
        """Where the digests of this runner's input files are remembered."""
        return self.marker_dir / ".digests.json"

    def marker(self, name: str) -> Path:
        """The done-marker of step ``name``."""
        return self.marker_dir / f"{name}.json"

    def forget(self, name: str) -> None:
        """Make step ``name`` run again next time (``--rescore``)."""
        self.marker(name).unlink(missing_ok=True)

    def is_done(self, name: str, fp: str, outputs: list[Path]) -> bool:
        """Whether step ``name`` finished with fingerprint ``fp`` and its outputs exist."""
        marker = self.marker(name)
        if not marker.exists():
            return False
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return False
        return info.get("fingerprint") == fp and all(Path(p).exists() for p in outputs)

    def step_fingerprint(
        self,
        params: Any = None,
        deps: tuple[str, ...] = (),
        inputs: Sequence[Path | None] = (),
    ) -> str:
        """The fingerprint a step with these parameters, dependencies and inputs has now."""
        return fingerprint(
            {
                "params": params,
                "deps": [self.fingerprints.get(d) for d in deps],
                "inputs": input_digests(inputs, self.digest_cache),
            }
        )

    def run(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        outputs: list[Path],
        params: Any = None,
        deps: tuple[str, ...] = (),
        inputs: Sequence[Path | None] = (),
    ) -> bool:
        """Run ``fn`` unless already done; return True if it ran."""
        self.hold()
        fp = self.step_fingerprint(params, deps, inputs)
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
            self.marker(name),
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
