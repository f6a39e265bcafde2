"""localnmt.atomic: a file is written whole or not at all."""

from __future__ import annotations

import json

import pytest

from localnmt.atomic import atomic_open, atomic_path, temporary_sibling, write_json, write_text


def test_write_text_and_json_replace_the_file_whole(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    write_text(path, "one\n")
    write_text(path, "two\n")
    assert path.read_text(encoding="utf-8") == "two\n"
    write_json(tmp_path / "b.json", {"ü": [1, 2]})
    text = (tmp_path / "b.json").read_text(encoding="utf-8")
    assert text.endswith("\n") and "ü" in text and json.loads(text) == {"ü": [1, 2]}


def test_an_error_while_writing_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.txt"
    write_text(path, "old\n")
    with pytest.raises(RuntimeError, match="disk"):
        with atomic_open(path) as f:
            f.write("half")
            raise RuntimeError("disk")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_nothing_appears_before_success(tmp_path):
    path = tmp_path / "a.txt"
    with atomic_open(path) as f:
        f.write("x")
        assert not path.exists() and temporary_sibling(path).exists()
    assert path.read_text(encoding="utf-8") == "x"


def test_a_folder_is_replaced_whole(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "stale").write_text("s")
    with atomic_path(folder) as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("n")
    assert sorted(p.name for p in folder.iterdir()) == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_binary_mode_writes_bytes_as_given(tmp_path):
    with atomic_open(tmp_path / "b.bin", "wb") as f:
        f.write(b"\r\n\x00")
    assert (tmp_path / "b.bin").read_bytes() == b"\r\n\x00"
