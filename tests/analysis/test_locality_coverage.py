"""The locality-bias analysis says what it covered, and uses the whole CoNLL-U file by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from localnmt import testing
from localnmt.analysis import conllu, locality_bias

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conllu"
CONLLU = FIXTURES / "sample.conllu"
BPE = FIXTURES / "sample.bpe"


def test_reports_sentences_words_and_tokens(tiny_data, tmp_path, capsys, monkeypatch):
    result = testing.train(tiny_data, tmp_path / "ckpt", "pande2021_2lochead_all6", max_update=2,
                           extra=["--encoder-layers", "2", "--decoder-layers", "1",
                                  "--encoder-attention-heads", "8"])  # fmt: skip
    sentences = conllu.read_conllu(CONLLU)
    pieces = conllu.read_bpe(BPE, len(sentences))
    common = ["--path", str(result.checkpoint), "--data", str(tiny_data), "--conllu", str(CONLLU),
              "--bpe", str(BPE)]  # fmt: skip
    assert locality_bias.main([*common, "--out", str(tmp_path / "all")]) == 0
    words = sum(len(s.words) for s in sentences)
    tokens = sum(len(line.split()) for line in pieces)
    expected = (f"used {len(sentences)} of {len(sentences)} sentences of {CONLLU} "
                f"({words} words, {tokens} subword tokens)")  # fmt: skip
    assert expected in capsys.readouterr().out
    two = ["--max-sentences", "2", "--out", str(tmp_path / "two")]
    assert locality_bias.main([*common, *two]) == 0
    words = sum(len(s.words) for s in sentences[:2])
    tokens = sum(len(line.split()) for line in pieces[:2])
    expected = (f"used 2 of {len(sentences)} sentences of {CONLLU} "
                f"({words} words, {tokens} subword tokens)")  # fmt: skip
    assert expected in capsys.readouterr().out
    # the sensitivity analysis counts the same way, and an empty file is one message, exit 2
    from localnmt.analysis import sensitivity

    monkeypatch.delenv("LOCALNMT_PROGRESS", raising=False)
    assert sensitivity.main([*common, *two]) == 0
    shown = capsys.readouterr()
    assert f"sensitivity: {expected}" in shown.out
    assert "sentences:" not in shown.err  # stderr is no terminal here: no progress bar
    monkeypatch.setenv("LOCALNMT_PROGRESS", "1")  # as on a terminal
    for module in (sensitivity, locality_bias):
        assert module.main([*common, *two]) == 0
        bar = capsys.readouterr().err
        assert "sentences: 100%" in bar and "2/2" in bar and "sent/s" in bar
    monkeypatch.delenv("LOCALNMT_PROGRESS")
    empty = tmp_path / "empty.conllu"
    empty.write_text("")
    for module in (locality_bias, sensitivity):
        args = ["--path", str(result.checkpoint), "--data", str(tiny_data), "--conllu", str(empty)]
        with pytest.raises(SystemExit) as err:
            module.main([*args, "--out", str(tmp_path / "e")])
        assert err.value.code == 2 and f"{empty}: no sentences" in capsys.readouterr().err
