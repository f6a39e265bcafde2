"""prepare_parallel.sh: inputs that exist but are no regular file, and a SIGTERM in the middle
of tokenising (issue: the FIFO was called "missing"; the kill left ``tok/.train.en.tmp<pid>``
behind and the workers printed BrokenPipeError tracebacks)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from localnmt.data.parallel import side_file
from localnmt.errors import DataError

NOT_REGULAR = ", not a regular file: the corpus is read more than once (validated, then " \
    "tokenised); give a regular file"  # fmt: skip


def test_a_fifo_is_named_as_one(tmp_path) -> None:
    os.mkfifo(tmp_path / "corpus.en")
    with pytest.raises(DataError) as err:
        side_file(tmp_path / "corpus", "en")
    assert str(err.value) == f"{tmp_path}/corpus.en is a FIFO{NOT_REGULAR}"


def test_a_link_to_dev_null_is_named_as_one(tmp_path) -> None:
    (tmp_path / "corpus.de").symlink_to("/dev/null")
    with pytest.raises(DataError) as err:
        side_file(tmp_path / "corpus", "de")
    assert str(err.value) == (
        f"{tmp_path}/corpus.de is a character device (a link to /dev/null){NOT_REGULAR}"
    )


#: prepare_parallel with a tokeniser input that sends SIGTERM to the command (as `kill PID`
#: would) after the first 2500 lines, while its workers are busy
KILLED_MID_FILE = """
import os, signal, sys
from localnmt.data import parallel, text_tokenize
real = text_tokenize.iter_lines_checked
def lines(path):
    for n, line in enumerate(real(path)):
        if n == 2500:
            os.kill(os.getpid(), signal.SIGTERM)
        yield line
text_tokenize.iter_lines_checked = lines
sys.exit(parallel.main(sys.argv[1:]))
"""


def test_a_sigterm_while_tokenising_leaves_no_temporary_file_and_no_traceback(tmp_path):
    for lang in ("en", "de"):
        words = [f"word{i % 97} {lang}{i % 89} w{i % 13}" for i in range(6000)]
        (tmp_path / f"train.{lang}").write_text("\n".join(words) + "\n", encoding="utf-8")
        for split in ("valid", "test"):
            (tmp_path / f"{split}.{lang}").write_text("a b\nc d\n", encoding="utf-8")
    work = tmp_path / "work"
    argv = ["--src", "en", "--tgt", "de", "--train", str(tmp_path / "train"), "--valid",
            str(tmp_path / "valid"), "--test", str(tmp_path / "test"), "--workdir", str(work),
            "--workers", "2"]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", KILLED_MID_FILE, *argv], capture_output=True,
                          text=True, start_new_session=True, timeout=300)  # fmt: skip
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "prepare_parallel.sh: terminated; finished steps are kept, a rerun resumes"
    )
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert not [p.name for p in work.rglob("*") if ".tmp" in p.name]
