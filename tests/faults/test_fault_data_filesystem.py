"""Data preparation and the file system: a --workdir that is a file, a read-only file system
and a full disk end in one line naming the path and the reason (exit 2, no traceback); after a
full disk, the same command resumes where it stopped. Test lines longer than a model's
positions are flagged when the data is made."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from localnmt.data import corpus_pipeline, parallel
from localnmt.data.corpus_layout import count_lines
from localnmt.evaluation.scoring import read_lines
from localnmt.fault_injection import failing_writes
from localnmt.testing import exit_status

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"
PARTS = {"train": (0, 30), "valid": (30, 34), "test": (34, 40)}
PROG = "prepare_parallel.sh"


def _argv(tmp_path: Path, work: Path) -> list[str]:
    """A small en-de corpus (fixture sentences) and the command that prepares it."""
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    for lang in ("en", "de"):
        lines = (FIX / f"sample.{lang}").read_text(encoding="utf-8").split("\n")
        for name, (i, j) in PARTS.items():
            (corpus / f"{name}.{lang}").write_text("".join(x + "\n" for x in lines[i:j]))
    return ["--src", "en", "--tgt", "de", "--train", str(corpus / "train"),
            "--valid", str(corpus / "valid"), "--test", str(corpus / "test"),
            "--workdir", str(work), "--bpe-merges", "50", "--workers", "1"]  # fmt: skip


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    """Exit status, standard output, and the one error line (subword-nmt's progress bar
    aside, nothing else is on standard error: no traceback)."""
    code = exit_status(parallel.main, argv)
    out = capsys.readouterr()
    errors = [x for x in out.err.splitlines() if x.strip() and "it/s]" not in x]
    assert len(errors) <= 1, out.err
    return code, out.out, "".join(errors)


def test_a_workdir_that_is_a_file(tmp_path, capsys) -> None:
    work = tmp_path / "work"
    work.write_text("my notes\n")
    code, _, err = _run(_argv(tmp_path, work), capsys)
    assert (code, err) == (2, f"{PROG}: error: --workdir {work} is a file; give a directory "
                              "(made if missing)")  # fmt: skip
    assert work.read_text() == "my notes\n"


@pytest.mark.parametrize(("code", "advice"), [
    (errno.EROFS, "the file system is read-only; choose a --workdir on a writable one"),
    (errno.EACCES, "no permission; choose a --workdir you can write to, or fix its permissions"),
], ids=["read-only", "permission"])  # fmt: skip
def test_a_workdir_that_cannot_be_written(tmp_path, capsys, monkeypatch, code, advice) -> None:
    work = tmp_path / "work"
    work.mkdir()
    failing_writes(monkeypatch, lambda p: work in p.parents,
                   lambda p: OSError(code, os.strerror(code), str(p)))  # fmt: skip
    status, _, err = _run(_argv(tmp_path, work), capsys)
    assert status == 2
    assert err.startswith(f"{PROG}: error: --workdir {work} cannot be written: {work}/")
    assert err.endswith(f": {os.strerror(code)} ({advice})")


def test_a_full_disk_is_one_line_and_the_rerun_resumes(tmp_path, capsys, monkeypatch) -> None:
    work = tmp_path / "work"
    argv = _argv(tmp_path, work)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a write names no file
    failing_writes(monkeypatch, lambda p: p.parent.name == "bpe" and "test.de" in p.name,
                   lambda p: full, after_writes=2)  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert (code, err) == (2, f"{PROG}: error: {work}: No space left on device (the disk is "
                              "full; free some space and run the same command again: finished "
                              "steps are kept)")  # fmt: skip
    assert "[done] bpe.apply.test.en" in out
    assert not (work / "bpe" / "test.de").exists()  # the half-written file is not kept
    monkeypatch.undo()  # space freed
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    assert "[skip] bpe.apply.test.en: already done" in out and "[run ] bpe.apply.test.de" in out
    assert "[run ] tokenize" not in out
    assert len(read_lines(work / "bpe" / "test.de")) == 6
    assert count_lines(work / "data-bin", "test", "en", "de") == 6


def test_long_test_lines_are_flagged_when_the_data_is_made(tmp_path, capsys, monkeypatch):
    class BinarizeReached(Exception):
        pass

    def stop(*args, **kwargs) -> None:
        raise BinarizeReached

    monkeypatch.setattr(corpus_pipeline, "_binarize", stop)  # the check comes before binarising
    work = tmp_path / "work"
    with pytest.raises(BinarizeReached):
        parallel.main([*_argv(tmp_path, work), "--max-positions", "12"])
    out = capsys.readouterr().out
    lengths = [len(x.split()) + 1 for x in read_lines(work / "bpe" / "test.en")]
    first = next(i for i, n in enumerate(lengths) if n > 12)
    assert (f"warning: {work}/bpe/test.en line {first + 1}: {lengths[first]} subword tokens "
            "(with </s>), more than 12 positions") in out  # fmt: skip
    assert "--max-positions" in out and "/bpe/train." not in out  # train lines may be long
