"""localnmt.errors: one family of errors, and the one line a command ends with."""

from __future__ import annotations

import errno

import pytest

from localnmt.errors import (
    DataError,
    LocalnmtError,
    TrainFailed,
    UsageError,
    entry_point,
    os_error_text,
)


def test_a_user_error_ends_in_one_line_with_status_2(capsys):
    @entry_point("localnmt-x")
    def main():
        raise UsageError("--beam must be at least 1, got 0")

    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2
    assert capsys.readouterr().err == "localnmt-x: error: --beam must be at least 1, got 0\n"


def test_a_failed_training_ends_with_the_trainers_status(capsys):
    @entry_point("localnmt-train")
    def main():
        raise TrainFailed("fairseq-train failed (see train.log)", status=3)

    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 3
    assert TrainFailed("x", status=0).exit_status == 1  # never 0: it failed
    assert capsys.readouterr().err.count("\n") == 1


def test_a_file_system_error_names_the_path_and_what_to_do(capsys):
    @entry_point("prog")
    def main():
        raise OSError(errno.ENOSPC, "No space left on device", "/data/x")

    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2
    assert capsys.readouterr().err == (
        "prog: error: /data/x: No space left on device (the disk is full; free some space "
        "and run the same command again: finished steps are kept)\n"
    )


def test_os_error_text_leaves_out_a_path_the_message_names_already():
    err = FileNotFoundError(errno.ENOENT, "No such file or directory", "/a")
    assert os_error_text(err) == "/a: No such file or directory (no such file or directory)"
    assert os_error_text(err, known_path="/a") == (
        "No such file or directory (no such file or directory)"
    )


def test_a_return_value_passes_through_and_other_errors_are_not_caught():
    assert entry_point("p")(lambda: 7)() == 7
    with pytest.raises(ZeroDivisionError):
        entry_point("p")(lambda: 1 / 0)()
    assert issubclass(DataError, LocalnmtError) and LocalnmtError.exit_status == 2
