"""localnmt-translate: plain text in, detokenised text out, as the data-bin records."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from localnmt import testing, translate
from localnmt.data.metadata import read_metadata
from localnmt.data.parallel import prepare_parallel
from localnmt.evaluation.postprocess import postprocess
from localnmt.testing import exit_status


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny En→De corpus (Moses splits the final period) through the parallel pipeline,
    and a tiny model trained on it."""
    root = tmp_path_factory.mktemp("translate")
    raw = testing.make_tiny_corpus(root / "tiny", train=300, valid=12)
    for split in ("train", "valid", "test"):
        for old, lang in (("src", "en"), ("tgt", "de")):
            rows = (raw / f"{split}.{old}").read_text().splitlines()
            (raw / f"{split}.{lang}").write_text("".join(r + ".\n" for r in rows))
    data_bin = prepare_parallel("en", "de", str(raw / "train"), str(raw / "valid"),
                                [str(raw / "test")], root / "work", bpe_merges=100,
                                log=lambda m: None)  # fmt: skip
    result = testing.train(data_bin, root / "ckpt", "localnmt_base", max_update=150)
    return data_bin, result.checkpoint


def test_same_as_fairseq_generate_on_the_test_subset(trained, tmp_path, capsys):
    data_bin, ckpt = trained
    info = read_metadata(data_bin)
    raw_test = data_bin.parent / "raw" / "test.en"
    sources = raw_test.read_text().splitlines()
    # the source is prepared exactly as the pipeline prepared the test set
    bpe_test = (data_bin.parent / "bpe" / "test.en").read_text().splitlines()
    assert translate.prepare_source(sources, info) == bpe_test
    out = tmp_path / "hyp.de"
    argv = ["--data-bin", str(data_bin), "--path", str(ckpt), "--input", str(raw_test),
            "--output", str(out), "--cpu", "--beam", "4", "--lenpen", "0.6"]  # fmt: skip
    assert translate.main(argv) == 0
    got = out.read_text(encoding="utf-8").splitlines()
    gen = testing.generate(data_bin, ckpt)  # beam 4, length penalty 0.6: the papers'
    expected = [postprocess(h, "de", "subword_nmt", "moses") for h in gen.hypotheses]
    assert got == expected and len(got) == len(sources)
    assert any(line.endswith(".") and not line.endswith(" .") for line in got)  # detokenised


def test_stdin_empty_lines_and_errors(trained, monkeypatch, capsys, tmp_path):
    data_bin, ckpt = trained
    text = "s1 s2 s3.\n\ns4 s5.\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert translate.main(["--data-bin", str(data_bin), "--path", str(ckpt), "--cpu"]) == 0
    out = capsys.readouterr().out.split("\n")
    assert len(out) == 4 and out[1] == "" and out[0] and out[2] and out[3] == ""
    assert exit_status(translate.main, ["--data-bin", str(tmp_path), "--path", str(ckpt)]) == 2
    err = capsys.readouterr().err
    assert "localnmt_data.json not found" in err and "--bpe-codes" in err
    assert (
        exit_status(
            translate.main, ["--data-bin", str(data_bin), "--path", str(tmp_path / "no.pt")]
        )
        == 2
    )
    assert "checkpoint not found" in capsys.readouterr().err
    missing = ["--data-bin", str(data_bin), "--path", str(ckpt), "--input", str(Path("nope"))]
    assert exit_status(translate.main, missing) == 2
    assert "missing input file: nope" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ok\nschl\xfcssel\n")))
    assert (
        exit_status(translate.main, ["--data-bin", str(data_bin), "--path", str(ckpt), "--cpu"])
        == 2
    )
    assert "<stdin>:2: invalid UTF-8" in capsys.readouterr().err
