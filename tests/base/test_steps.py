"""localnmt.steps: a step runs once per fingerprint; a change reruns it and what depends on it."""

from __future__ import annotations

import pytest

from localnmt.errors import DataError
from localnmt.steps import StepRunner, fingerprint


def test_fingerprint_is_stable_and_order_free():
    assert fingerprint({"a": 1, "b": [2, 3]}) == fingerprint({"b": [2, 3], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint(None)) == 16


def _steps(workdir, calls, lines, params=1, text="in"):
    (workdir / "input.txt").write_text(text)
    runner = StepRunner(workdir, log=lines.append)

    def make(name):
        def run():
            calls.append(name)
            (workdir / f"{name}.out").write_text(name)

        return run

    runner.run("a", make("a"), outputs=[workdir / "a.out"], params=params,
               inputs=[workdir / "input.txt"])  # fmt: skip
    runner.run("b", make("b"), outputs=[workdir / "b.out"], deps=("a",))
    return runner


def test_a_rerun_skips_finished_steps(tmp_path):
    calls, lines = [], []
    _steps(tmp_path, calls, lines)
    runner = _steps(tmp_path, calls, lines)
    assert calls == ["a", "b"] and runner.skipped == ["a", "b"] and runner.ran == []
    assert lines[-1] == "[skip] b: already done"


@pytest.mark.parametrize("change", ["params", "input"])
def test_a_change_reruns_the_step_and_its_dependants(tmp_path, change):
    calls, lines = [], []
    _steps(tmp_path, calls, lines)
    _steps(tmp_path, calls, lines, params=2 if change == "params" else 1,
           text="changed" if change == "input" else "in")  # fmt: skip
    assert calls == ["a", "b", "a", "b"]


def test_a_missing_output_reruns_that_step_only(tmp_path):
    calls, lines = [], []
    _steps(tmp_path, calls, lines)
    (tmp_path / "a.out").unlink()
    _steps(tmp_path, calls, lines)
    assert calls == ["a", "b", "a"]  # b's inputs (a's fingerprint) are unchanged


def test_forget_reruns_one_step(tmp_path):
    calls, lines = [], []
    _steps(tmp_path, calls, lines).forget("b")
    _steps(tmp_path, calls, lines)
    assert calls == ["a", "b", "b"]


def test_a_step_that_writes_no_output_is_an_error_and_not_marked_done(tmp_path):
    runner = StepRunner(tmp_path, log=lambda _: None)
    with pytest.raises(DataError, match="step c finished without writing .*c.out"):
        runner.run("c", lambda: None, outputs=[tmp_path / "c.out"])
    assert not runner.marker("c").exists()
