"""A checkpoint from elsewhere cannot run code: every command that loads one refuses a pickle
that asks for more than tensors and configuration, in one line, exit 2, and the payload (a
``touch MARKER``) never runs. A damaged checkpoint is one line naming the file."""

from __future__ import annotations

import json

import pytest

from localnmt import convert_checkpoint
from localnmt.fault_injection import write_crafted
from localnmt.runs import average_checkpoints
from localnmt.runs import decode_and_score as evaluate
from localnmt.testing import exit_status


def _fails_in_one_line(main, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as err:
        main(argv)
    assert err.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "bare-pickle"])
def test_convert_checkpoint_refuses_a_crafted_pickle(tmp_path, marker, capsys, legacy) -> None:
    crafted = write_crafted(tmp_path / "model.pt", marker, legacy=legacy)
    argv = [str(crafted), str(tmp_path / "out.pt"), "--arch", "localnmt_base"]
    message = _fails_in_one_line(convert_checkpoint.main, argv, capsys)
    assert f"{crafted}: refused to load" in message
    assert "posix.system" in message or "os.system" in message
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


def test_average_checkpoints_refuses_a_crafted_pickle(tmp_path, marker, capsys) -> None:
    for epoch in (1, 2):
        write_crafted(tmp_path / f"checkpoint{epoch}.pt", marker)
    argv = ["--inputs", str(tmp_path), "--num-epoch-checkpoints", "2",
            "--output", str(tmp_path / "avg.pt")]  # fmt: skip
    message = _fails_in_one_line(average_checkpoints.main, argv, capsys)
    assert "checkpoint2.pt: refused to load: its pickle asks for posix.system" in message
    assert not marker.exists() and not (tmp_path / "avg.pt").exists()


def test_evaluate_average_dir_refuses_a_crafted_pickle(tiny_data, tmp_path, marker, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for epoch in (1, 2):
        write_crafted(run / f"checkpoint{epoch}.pt", marker)
    argv = ["--average-dir", str(run), "--average", "2", "--data-bin", str(tiny_data),
            "--out", str(tmp_path / "eval")]  # fmt: skip
    message = _fails_in_one_line(evaluate.main, argv, capsys)
    assert "refused to load: its pickle asks for posix.system" in message
    assert not marker.exists()


def test_evaluate_refuses_a_crafted_checkpoint_before_decoding(tiny_data, tmp_path, marker,
                                                               capsys, monkeypatch):  # fmt: skip
    decoded = []
    monkeypatch.setattr(evaluate, "translate", lambda *a, **k: decoded.append(a))
    crafted = write_crafted(tmp_path / "model.pt", marker)
    argv = ["--data-bin", str(tiny_data), "--checkpoint", str(crafted),
            "--out", str(tmp_path / "eval")]  # fmt: skip
    message = _fails_in_one_line(evaluate.main, argv, capsys)
    assert f"{crafted}: refused to load" in message
    assert decoded == [] and not marker.exists()


def test_translate_refuses_a_crafted_checkpoint(tmp_path, marker, capsys) -> None:
    from localnmt import translate

    data_bin = tmp_path / "bin"
    data_bin.mkdir()
    (data_bin / "localnmt_data.json").write_text(json.dumps({"src": "en", "tgt": "de"}))
    (tmp_path / "in.en").write_text("hello\n")
    crafted = write_crafted(tmp_path / "model.pt", marker)
    argv = ["--data-bin", str(data_bin), "--path", str(crafted),
            "--input", str(tmp_path / "in.en")]  # fmt: skip
    assert exit_status(translate.main, argv) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"localnmt-translate: error: {crafted}: refused to load")
    assert "\n" not in message
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 cut short"], ids=["empty", "truncated"])
def test_a_damaged_checkpoint_is_one_line_naming_it(tiny_data, tmp_path, capsys, content):
    damaged = tmp_path / "checkpoint1.pt"
    damaged.write_bytes(content)
    message = _fails_in_one_line(
        convert_checkpoint.main, [str(damaged), str(tmp_path / "out.pt")], capsys
    )
    assert f"{damaged}: damaged or not a checkpoint" in message
    argv = ["--inputs", str(damaged), "--output", str(tmp_path / "avg.pt")]
    message = _fails_in_one_line(average_checkpoints.main, argv, capsys)
    assert f"{damaged}: damaged or not a checkpoint" in message
    for argv in (["--checkpoint", str(damaged)],
                 ["--average-dir", str(tmp_path), "--average", "1"]):  # fmt: skip
        argv += ["--data-bin", str(tiny_data), "--out", str(tmp_path / "eval")]
        message = _fails_in_one_line(evaluate.main, argv, capsys)
        assert f"{damaged}: damaged or not a checkpoint" in message
