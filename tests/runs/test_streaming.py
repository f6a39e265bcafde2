"""The one line-streaming loop under fairseq-train's log and fairseq-generate's output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localnmt.runs.launch import run_logged
from localnmt.runs.streaming import stream_lines

_PRINT = "import sys; sys.stdout.buffer.write({!r}); sys.stderr.write('err\\n')"


def test_bytes_come_exactly_as_written_and_stderr_goes_elsewhere(tmp_path) -> None:
    data = b"S-0\ta\r\nH-0\t-0.1\tx\xe2\x80\xa8y\nlast"
    lines: list[bytes] = []
    with open(tmp_path / "err", "w") as err:
        status = stream_lines([sys.executable, "-c", _PRINT.format(data)], lines.append,
                              stderr=err, text=False)  # fmt: skip
    assert status == 0 and lines == [b"S-0\ta\r\n", b"H-0\t-0.1\tx\xe2\x80\xa8y\n", b"last"]
    assert (tmp_path / "err").read_text() == "err\n"


def test_text_lines_merge_stderr_and_return_the_status() -> None:
    code = "import sys; print('out', flush=True); sys.stderr.write('err\\n'); sys.exit(3)"
    lines: list[str] = []
    assert stream_lines([sys.executable, "-c", code], lines.append) == 3
    assert lines == ["out\n", "err\n"]


def test_an_error_of_the_callback_stops_the_child(tmp_path) -> None:
    """The child (which would print forever) is stopped and waited for; the error goes on."""
    code = "import time\nwhile True:\n    print('tick', flush=True); time.sleep(0.01)"
    started: list[subprocess.Popen] = []
    real_start = subprocess.Popen

    class Recorded(real_start):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    def fail(line: str) -> None:
        raise RuntimeError("display broke")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess, "Popen", Recorded)
        with pytest.raises(RuntimeError, match="display broke"):
            stream_lines([sys.executable, "-c", code], fail)
    assert len(started) == 1 and started[0].returncode is not None


def test_run_logged_writes_the_command_then_every_line(tmp_path: Path, capsys) -> None:
    code = "print('a'); print('b')"
    seen: list[str] = []
    cmd = [sys.executable, "-c", code]
    assert run_logged(cmd, tmp_path / "x.log", echo=True, on_line=seen.append) == 0
    text = (tmp_path / "x.log").read_text()
    assert text.splitlines()[1:] == ["a", "b"] and text.startswith("$ ")
    assert seen == ["a", "b"] and capsys.readouterr().out == "a\nb\n"
