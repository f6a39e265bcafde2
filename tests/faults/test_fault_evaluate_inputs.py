"""Evaluation fails early and in one line (exit 2): references of the wrong length, hypotheses
and references that differ or are empty, a test sentence longer than the model's positions;
all found before anything is decoded. Scoring functions raise the project's DataError."""

from __future__ import annotations

import sys

import pytest

from localnmt.errors import DataError
from localnmt.runs import decode_and_score as evaluate

TEST_SENTENCES = 24  # the tiny corpus's test set (localnmt.testing.make_tiny_corpus)


def _fails_in_one_line(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as err:
        evaluate.main(argv)
    assert err.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def decoded(monkeypatch) -> list:
    """Calls of the decoder (none expected): any would be long work before the error."""
    calls: list = []
    monkeypatch.setattr(evaluate, "translate", lambda *a, **k: calls.append(a))
    return calls


def test_a_reference_of_the_wrong_length_is_found_before_decoding(tiny_data, tmp_path,
                                                                 decoded, capsys):  # fmt: skip
    ref = tmp_path / "ref.tgt"
    ref.write_text("t1 t2\nt3\nt4\n")
    argv = ["--data-bin", str(tiny_data), "--checkpoint", str(tmp_path / "any.pt"),
            "--ref", str(ref), "--out", str(tmp_path / "eval")]  # fmt: skip
    message = _fails_in_one_line(argv, capsys)
    assert f"--ref {ref} has 3 lines, but the test subset of {tiny_data} has 24" in message
    assert decoded == []


def test_hypotheses_and_references_of_different_lengths(tmp_path, capsys) -> None:
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("a\nb\nc\nd\n")
    ref.write_text("a\nb\nc\n")
    argv = ["--hyp", str(hyp), "--ref", str(ref), "--target-lang", "de", "--out", str(tmp_path)]
    message = _fails_in_one_line(argv, capsys)
    assert f"--ref {ref} has 3 lines, but --hyp {hyp} has 4" in message
    assert not (tmp_path / "scores.json").exists()


def test_empty_hypotheses_and_references(tmp_path, capsys) -> None:
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("")
    ref.write_text("")
    argv = ["--hyp", str(hyp), "--ref", str(ref), "--target-lang", "de", "--out", str(tmp_path)]
    assert f"--hyp {hyp} is empty: nothing to score" in _fails_in_one_line(argv, capsys)


def test_a_test_line_longer_than_the_model_positions(tiny_data, few_positions_model, tmp_path,
                                                     decoded, capsys):  # fmt: skip
    argv = ["--data-bin", str(tiny_data), "--checkpoint", str(few_positions_model),
            "--out", str(tmp_path / "eval")]  # fmt: skip
    message = _fails_in_one_line(argv, capsys)
    lengths = [len(line.split()) + 1 for line in (tiny_data.parent / "raw" / "test.src")
               .read_text().splitlines()]  # fmt: skip
    first = next(i for i, n in enumerate(lengths) if n > 10)
    assert message.endswith(
        f"{tiny_data}/test.src-tgt.src line {first + 1}: {lengths[first]} subword tokens, more "
        "than the model's 10 source positions; split the line"
    )
    assert decoded == []


def test_a_failed_generation_names_its_cause(tmp_path) -> None:
    """Whatever fairseq-generate stops on, the error says why (not only in its log)."""
    from localnmt.runs.generate import run_generate

    cmd = [sys.executable, "-c", "raise Exception('Size of sample #3 is invalid (=(12, 9))')"]
    with pytest.raises(DataError) as err:
        run_generate(cmd, tmp_path / "generate.out", tmp_path / "generate.log")
    assert "Exception: Size of sample #3 is invalid (=(12, 9))" in str(err.value)
    assert str(tmp_path / "generate.log") in str(err.value)


def test_scoring_functions_raise_a_data_error() -> None:
    from localnmt.evaluation.breakdown import bleu_by_length
    from localnmt.evaluation.metrics import sacrebleu_score, tokenized_bleu
    from localnmt.evaluation.significance import paired_bootstrap

    with pytest.raises(DataError, match="no hypotheses and no references: nothing to score"):
        sacrebleu_score([], [], "de")
    with pytest.raises(DataError, match="nothing to score"):
        tokenized_bleu([], [], "de")
    with pytest.raises(DataError, match="2 hypotheses but 1 references"):
        paired_bootstrap(["a", "b"], ["a", "b"], ["a"], samples=2)
    with pytest.raises(DataError, match="1 sources but 2 hypotheses"):
        bleu_by_length(["x"], ["a", "b"], ["a", "b"])
