"""localnmt_data.json read back: per-language fields, the older ``config`` layout, and the
post-processing that scoring takes from it."""

from __future__ import annotations

import json
from pathlib import Path

from localnmt.data.metadata import FILENAME, post_processing, read_metadata


def _write(path: Path, meta: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / FILENAME).write_text(json.dumps(meta), encoding="utf-8")
    return path


def test_new_layout_sentencepiece_and_pretokenized_target(tmp_path) -> None:
    data = _write(tmp_path / "bin", {
        "src": "zh", "tgt": "en", "tokenizer": {"zh": "jieba", "en": "none"},
        "normalize": {"zh": False, "en": False}, "bpe": "sentencepiece",
        "bpe_model": {"zh": "spm.zh.model", "en": "spm.en.model"},
    })  # fmt: skip
    info = read_metadata(data)
    assert (info.bpe, info.detok) == ("sentencepiece", "none")
    assert info.bpe_model["en"] == data / "spm.en.model"
    assert post_processing(data) == ("sentencepiece", "none")
    assert post_processing(data, bpe="subword_nmt") == ("subword_nmt", "none")  # given wins
    assert post_processing(data, detok="moses") == ("sentencepiece", "moses")


def test_older_config_layout(tmp_path) -> None:
    data = _write(tmp_path / "old", {"config": {
        "src": "en", "tgt": "de", "bpe": "subword_nmt", "joint_bpe": False,
        "pretokenized": False, "normalize_target": False,
    }})  # fmt: skip
    info = read_metadata(data)
    assert info.tokenizer == {"en": "moses", "de": "moses"}
    assert info.normalize == {"en": True, "de": False}
    assert info.bpe_model["de"].name != info.bpe_model["en"].name  # separate models
    assert post_processing(data) == ("subword_nmt", "moses")


def test_data_bin_made_elsewhere_gets_the_defaults(tmp_path) -> None:
    assert post_processing(tmp_path) == ("subword_nmt", "moses")
    assert post_processing(tmp_path, "none", "none") == ("none", "none")
