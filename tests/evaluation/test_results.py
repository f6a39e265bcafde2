"""Typed scores and ``scores.json``: the file keeps its keys, order and values."""

from __future__ import annotations

import json

from localnmt.evaluation.results import (
    MultiRefScores,
    Scored,
    Scores,
    TrainingRecord,
    read_scores,
    write_scores,
)
from localnmt.evaluation.scoring import ScoringOptions, score

HYPS = ["the cat sat on the mat .", "a dog barks ."]
REFS = ["the cat sat on the mat .", "the dog barks ."]


def test_scores_json_keeps_the_files_keys_and_the_training_block(tmp_path) -> None:
    training = TrainingRecord("ck.pt", 95, 2000, False)
    result = score(HYPS, REFS, "en", sources=HYPS, source_lang="en", baseline_hyps=REFS,
                   options=ScoringOptions(bootstrap_samples=10),
                   scored=Scored("ck.pt", training, "en", "ref.en"))  # fmt: skip
    write_scores(tmp_path / "scores.json", result)
    on_disk = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert list(on_disk) == ["sentences", "sacrebleu", "tokenized_bleu", "length_buckets",
                             "length_unit", "bootstrap", "ngram_precision_gaps", "checkpoint",
                             "training", "target_lang", "references"]  # fmt: skip
    assert on_disk["training"] == {"checkpoint": "ck.pt", "updates": 95, "max_update": 2000,
                                   "finished": False}  # fmt: skip
    assert on_disk["sacrebleu"]["score"] == result.bleu
    assert read_scores(tmp_path / "scores.json") == result
    assert "95 of 2000 updates, UNFINISHED run" in result.summary()


def test_scored_hypothesis_file_has_no_checkpoint_keys() -> None:
    on_disk = score(HYPS, REFS, "en").to_json()
    assert list(on_disk) == ["sentences", "sacrebleu", "tokenized_bleu"]
    assert Scores.from_json(on_disk).scored is None


def test_multi_reference_scores_round_trip(tmp_path) -> None:
    single = score(HYPS, REFS, "en", scored=Scored("ck.pt", None, "en", "mt03.en"))
    multi = MultiRefScores(average=single.bleu, sets={"mt03": single.sacrebleu},
                           subsets={"test": "mt03"}, signature=single.signature,
                           references="refs", checkpoint="ck.pt", training=None,
                           single_ref={"mt03": single})  # fmt: skip
    write_scores(tmp_path / "scores.json", multi)
    on_disk = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert on_disk["scoring"] == "nist_multi_ref" and on_disk["training"] is None
    assert read_scores(tmp_path / "scores.json") == multi
    assert multi.summary().startswith(f"average multi-reference BLEU {single.bleu:.2f}")
