"""A damaged data-bin stops localnmt-train (and the quickstart and reproduce, which train
through the same run) in one line before training, instead of fairseq's traceback when a
batch reaches the damage (issue: truncated .bin, missing .idx, malformed dict.src.txt)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localnmt.errors import UsageError
from localnmt.runs import train
from localnmt.runs.data_bin import check_data_bin_files
from localnmt.testing import exit_status

REBUILD = "binarise the corpus again (the data_prep/ script that made it, or fairseq-preprocess)"


@pytest.fixture
def data_bin(tiny_data, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_data, tmp_path / "bin"))


def _truncate(path: Path, by: int) -> None:
    path.write_bytes(path.read_bytes()[:-by])


def test_a_truncated_bin_stops_localnmt_train_before_training(data_bin, tmp_path, capsys):
    binary = data_bin / "train.src-tgt.src.bin"
    size = binary.stat().st_size
    _truncate(binary, 10)
    argv = ["--data", str(data_bin), "--save-dir", str(tmp_path / "ck"), "--cpu", "--size",
            "tiny", "--max-update", "2"]  # fmt: skip
    assert exit_status(train.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"localnmt-train: error: {binary}: {size - 10} bytes where its index "
        f"train.src-tgt.src.idx says {size} (cut short); {REBUILD}"
    )
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_a_missing_index_is_named(data_bin) -> None:
    (data_bin / "valid.src-tgt.tgt.idx").unlink()
    with pytest.raises(UsageError) as err:
        check_data_bin_files(data_bin)
    assert str(err.value) == (
        f"{data_bin}/valid.src-tgt.tgt.idx is missing (its valid.src-tgt.tgt.bin is there); "
        f"{REBUILD}"
    )


def test_a_missing_split_is_named(data_bin) -> None:
    for lang in ("src", "tgt"):
        for suffix in ("bin", "idx"):
            (data_bin / f"valid.src-tgt.{lang}.{suffix}").unlink()
    with pytest.raises(UsageError, match=r"has no valid split for src-tgt \(valid.src-tgt.src"):
        check_data_bin_files(data_bin)


def test_a_malformed_dictionary_is_named(data_bin) -> None:
    with open(data_bin / "dict.src.txt", "a", encoding="utf-8") as f:
        f.write("garbage\n")
    with pytest.raises(UsageError) as err:
        check_data_bin_files(data_bin)
    assert str(err.value).startswith(
        f"{data_bin}/dict.src.txt: not a fairseq dictionary (Incorrect dictionary format"
    )


def test_a_cut_index_is_named(data_bin) -> None:
    _truncate(data_bin / "train.src-tgt.tgt.idx", 5)
    with pytest.raises(UsageError, match=r"train.src-tgt.tgt.idx: damaged index"):
        check_data_bin_files(data_bin)


def test_ids_beyond_the_dictionary_are_refused(data_bin) -> None:
    """The .bin of another corpus (or a shorter dictionary) beside this one."""
    entries = (data_bin / "dict.tgt.txt").read_text(encoding="utf-8").splitlines()
    (data_bin / "dict.tgt.txt").write_text("\n".join(entries[:5]) + "\n", encoding="utf-8")
    message = r"\.src-tgt\.tgt\.bin: token id \d+ but its dictionary has 9 entries \(a data-bin"
    with pytest.raises(UsageError, match=message):
        check_data_bin_files(data_bin)


def test_a_whole_data_bin_passes_and_gives_its_longest_sentences(tiny_data) -> None:
    longest = check_data_bin_files(tiny_data).longest
    assert set(longest) == {"src", "tgt"} and all(0 < n <= 40 for n in longest.values())
