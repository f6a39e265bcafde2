"""Progress bars of the long commands (localnmt/progress.py): none when stderr is not a
terminal, one with a rate and the time left when it is (or when LOCALNMT_PROGRESS=1)."""

from __future__ import annotations

import io
import sys

import pytest

from localnmt import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_forcing(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)


def test_bars_follow_the_terminal_unless_forced(monkeypatch, no_forcing) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.enabled()
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert progress.enabled()
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.enabled()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.enabled()


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch, no_forcing) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert list(progress.track(range(3), desc="sentences", unit="sent")) == [0, 1, 2]
    assert err.getvalue() == ""


def test_a_bar_with_rate_and_time_left_on_a_terminal(monkeypatch, no_forcing) -> None:
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert list(progress.track(range(3), desc="sentences", unit="sent")) == [0, 1, 2]
    shown = err.getvalue()
    assert "sentences" in shown and "3/3" in shown and "sent/s" in shown and "<" in shown


def test_forced_on_without_a_terminal(monkeypatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv(progress.ENV, "1")
    list(progress.track([1, 2], desc="pairs"))
    assert "2/2" in err.getvalue()


def test_lines_in_counts_newlines(tmp_path) -> None:
    (tmp_path / "a.txt").write_bytes(b"x\ny\n\xe2\x80\xa8z\n")  # U+2028 is no line end
    assert progress.lines_in(tmp_path / "a.txt") == 3
    assert progress.lines_in(tmp_path / "a.txt.gz") is None
    assert progress.lines_in(tmp_path / "missing.txt") is None


def _upper(job: tuple[str, list[str]]) -> list[str]:
    return [line.upper() for line in job[1]]


@pytest.mark.parametrize("workers", [1, 2])
def test_tokenising_and_segmenting_show_lines(monkeypatch, workers) -> None:
    from localnmt.data.text_tokenize import map_lines

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv(progress.ENV, "1")
    out = list(map_lines(_upper, "k", iter(["a", "b", "c"]), workers, chunk=2,
                         desc="tokenising x", total=3))  # fmt: skip
    assert out == ["A", "B", "C"] and "tokenising x" in err.getvalue()
    assert "100%" in err.getvalue() and "line/s" in err.getvalue()
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv(progress.ENV, "0")
    assert list(map_lines(_upper, "k", iter(["a"]), workers, desc="tokenising x")) == ["A"]
    assert err.getvalue() == ""


def test_fairseq_generate_output_is_kept_byte_for_byte_under_a_bar(monkeypatch, tmp_path) -> None:
    from localnmt.runs.generate import run_generate

    text = "S-0\ta b\nH-0\t-0.1\tx\u2028y\nS-1\tc\nH-1\t-0.2\tz\r\n"
    code = f"import sys; sys.stdout.buffer.write({text.encode()!r})"
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv(progress.ENV, "1")
    run_generate([sys.executable, "-c", code], tmp_path / "gen.out", sentences=2)
    assert (tmp_path / "gen.out").read_bytes() == text.encode()
    assert "translating" in err.getvalue() and "2/2" in err.getvalue()


def test_the_hub_batches_advance_the_bar(monkeypatch) -> None:
    from localnmt.translate import counted_batches

    class Hub:
        def _build_batches(self, sentences):
            return iter([{"id": [0, 1]}, {"id": [2]}])

        def generate(self, sentences):
            return [b for b in self._build_batches(sentences)]

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv(progress.ENV, "1")
    hub = Hub()
    with counted_batches(hub, 3):
        assert len(hub.generate([1, 2, 3])) == 2
    assert "3/3" in err.getvalue() and "_build_batches" not in vars(hub)
