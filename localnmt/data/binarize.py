"""Binarisation with ``fairseq-preprocess`` (run as a subprocess of this interpreter)."""

from __future__ import annotations

import sys
from pathlib import Path

from localnmt import processes
from localnmt.atomic import atomic_path
from localnmt.errors import DataError


def binarize(
    train: Path,
    valid: Path,
    tests: list[Path],
    dest: Path,
    src: str,
    tgt: str,
    *,
    joined_dictionary: bool = True,
    workers: int = 1,
    log=print,
) -> None:
    """``fairseq-preprocess`` of the ``<prefix>.{src,tgt}`` files of train, valid and tests.

    Several test prefixes become fairseq's ``test``, ``test1``, ... subsets. Written to a
    temporary directory and renamed onto ``dest`` only when fairseq succeeded.
    """
    testpref = ",".join(str(t) for t in tests)
    with atomic_path(dest) as tmp:
        cmd = [
            sys.executable, "-m", "fairseq_cli.preprocess",
            "--source-lang", src, "--target-lang", tgt,
            "--trainpref", str(train),
            "--validpref", str(valid),
            "--testpref", testpref,
            "--destdir", str(tmp),
            "--workers", str(max(1, workers)),
            "--thresholdsrc", "0", "--thresholdtgt", "0",
        ]  # fmt: skip
        if joined_dictionary:
            cmd.append("--joined-dictionary")
        log("  $ fairseq-preprocess " + " ".join(cmd[3:]))
        res = processes.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-15:])
            raise DataError(f"fairseq-preprocess failed (exit {res.returncode}):\n{tail}")
        (Path(tmp) / "preprocess.stdout.log").write_text(res.stdout + res.stderr, encoding="utf-8")


def binarize_monolingual(
    prefixes: dict[str, Path], dest: Path, srcdict: Path | None = None, workers: int = 1
) -> None:
    """``fairseq-preprocess --only-source`` of whole files: ``prefixes`` maps ``train`` (first)
    and the validation splits to their paths. With ``srcdict`` the given dictionary is kept
    (a pretrained model's); otherwise one is built from train. Atomic, as :func:`binarize`."""
    with atomic_path(dest) as tmp:
        cmd = [sys.executable, "-m", "fairseq_cli.preprocess", "--only-source",
               "--trainpref", str(prefixes["train"]), "--destdir", str(tmp),
               "--workers", str(max(1, workers))]  # fmt: skip
        valid = [str(p) for s, p in prefixes.items() if s != "train"]
        if valid:
            cmd += ["--validpref", ",".join(valid)]
        if srcdict is not None:
            cmd += ["--srcdict", str(srcdict)]
        res = processes.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-15:])
            raise DataError(f"fairseq-preprocess failed (exit {res.returncode}):\n{tail}")
