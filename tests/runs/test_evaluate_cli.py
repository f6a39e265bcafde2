"""python -m localnmt.runs.evaluate (scripts/evaluate.sh): checkpoint averaging options and
their errors (one message, exit 2)."""

from __future__ import annotations

import pytest

from localnmt.runs import decode_and_score as evaluate


def test_average_dir_without_checkpoints_is_a_usage_error(tmp_path, capsys) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "checkpoint_last.pt").write_bytes(b"")
    argv = ["--average-dir", str(tmp_path / "ck"), "--average", "3", "--data-bin", "B",
            "--out", str(tmp_path / "out")]  # fmt: skip
    with pytest.raises(SystemExit) as err:
        evaluate.main(argv)
    assert err.value.code == 2
    assert f"found 0 epoch checkpoints in {tmp_path}/ck, need 3" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        evaluate.main([*argv, "--by-update"])
    assert err.value.code == 2 and "found 0 update checkpoints" in capsys.readouterr().err


def test_generation_is_post_processed_as_the_data_bin_records(tmp_path) -> None:
    """A sentencepiece data-bin with a pre-tokenised target: hypotheses lose their ``▁``
    pieces and are not detokenised, with no --bpe / --detok given (given ones win)."""
    import json

    from localnmt.data.metadata import FILENAME
    from tests.fixtures.eval.tinydata import build_data_bin

    data_bin = build_data_bin(tmp_path / "w", merges=20)
    n = len((tmp_path / "w" / "raw" / "test.de").read_text().splitlines())
    lines = "S-{i}\t▁a ▁b\nT-{i}\t▁c ▁d\nH-{i}\t-0.5\t▁Hallo ▁Welt ▁, ▁ja\n"
    text = "".join(lines.format(i=i) for i in range(n))
    # no localnmt_data.json: subword-nmt and Moses, which leave sentencepiece's pieces alone
    assert evaluate.read_generation(text, data_bin, "test")["hyp"][0] == "▁Hallo ▁Welt ▁, ▁ja"
    (data_bin / FILENAME).write_text(json.dumps({
        "src": "en", "tgt": "de", "tokenizer": {"en": "moses", "de": "none"},
        "normalize": {"en": True, "de": False}, "bpe": "sentencepiece",
        "bpe_model": {"en": "spm.model", "de": "spm.model"},
    }))  # fmt: skip
    out = evaluate.read_generation(text, data_bin, "test")
    assert out["hyp"] == ["Hallo Welt , ja"] * n and out["ref_gen"][0] == "c d"
    assert evaluate.read_generation(text, data_bin, "test", detok="moses")["hyp"][0] == (
        "Hallo Welt, ja"
    )


def test_unreadable_text_is_one_message_exit_2(tmp_path, capsys) -> None:
    """--hyp with invalid UTF-8, or a missing reference, names the file (and line)."""
    from localnmt.evaluation import ceiling

    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_bytes(b"gut\nschl\xfcssel\n")
    ref.write_text("gut\nSchluessel\n", encoding="utf-8")
    argv = ["--hyp", str(hyp), "--ref", str(ref), "--target-lang", "de", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as err:
        evaluate.main(argv)
    assert err.value.code == 2 and f"{hyp}:2: invalid UTF-8" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        ceiling.main(["--ref", str(tmp_path / "none.de"), "--lang", "de"])
    assert err.value.code == 2 and "missing input file" in capsys.readouterr().err


def test_checkpoint_path_checks_given_files_before_translating(tmp_path, capsys, monkeypatch):
    """With --checkpoint, a missing --ref is one message, exit 2, and nothing is translated."""
    calls = []
    monkeypatch.setattr(evaluate, "translate", lambda *a, **k: calls.append(a))
    argv = ["--data-bin", str(tmp_path), "--checkpoint", str(tmp_path / "c.pt"),
            "--ref", str(tmp_path / "none.de"), "--out", str(tmp_path / "out")]  # fmt: skip
    with pytest.raises(SystemExit) as err:
        evaluate.main(argv)
    assert err.value.code == 2 and "missing input file" in capsys.readouterr().err
    assert calls == []
