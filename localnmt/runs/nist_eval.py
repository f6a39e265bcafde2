"""NIST Zh→En evaluation of one checkpoint (Zhang & Feng 2021, Table 2, "Nist Zh→En" column).

:mod:`localnmt.data.nist_zh_en` binarises each test set with its first reference as fairseq
subsets ``test``, ``test1`` .. ``test4`` and keeps the four lower-cased references of each
set in ``WORK/refs/mtXX.ref0..3`` with ``refs/subsets.json`` (subset → set name). Here every
subset is decoded (one fairseq process for the five: beam search, BPE removal,
detokenisation); ``evaluate_checkpoint`` gives each set's single-reference scores against
``raw/mtXX.en`` (= ref0) with the paired bootstrap against the baseline's hypotheses of the
same set; :func:`localnmt.evaluation.multi_ref.score_sets` gives its case-insensitive
4-reference BLEU. The row's BLEU is the unweighted 4-reference average over MT03–MT08, as
the paper reports it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from localnmt.evaluation.multi_ref import score_sets
from localnmt.evaluation.results import MultiRefScores, Scores, write_scores
from localnmt.evaluation.scoring import DEFAULT_SCORING, ScoringOptions, read_lines
from localnmt.runs.decode_and_score import (
    checkpoint_training,
    evaluate_checkpoint,
    translate_subsets,
)
from localnmt.runs.run_specs import DEFAULT_DECODING, DecodeSpec


def refs_dir_for(data_bin: Path) -> Path:
    """``WORK/refs`` next to ``WORK/data-bin`` (the data-prep layout)."""
    return Path(data_bin).parent / "refs"


def nist_subsets(refs_dir: Path) -> dict[str, str]:
    """fairseq subset → NIST set name, from ``refs/subsets.json``."""
    path = Path(refs_dir) / "subsets.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (written by data_prep/prepare_nist_zh_en.sh)")
    return json.loads(path.read_text())


def evaluate_nist(
    data_bin: Path,
    checkpoint: Path,
    out_dir: Path,
    refs_dir: Path,
    decode: DecodeSpec = DEFAULT_DECODING,
    *,
    baseline_dir: Path | None = None,
    user_dir: str | None = None,
    extra: Sequence[str] = (),
    scoring: ScoringOptions = DEFAULT_SCORING,
) -> MultiRefScores:
    """Decode every test subset as ``decode`` says, score it with all its references; writes
    ``scores.json``.

    ``baseline_dir``: the baseline's ``out_dir`` (its ``<set>/hyp.txt`` are the bootstrap's
    baseline); ``scoring``: the single-reference scores' options.
    """
    data_bin, out_dir, refs_dir = Path(data_bin), Path(out_dir), Path(refs_dir)
    raw = data_bin.parent / "raw"
    subsets = nist_subsets(refs_dir)
    single: dict[str, Scores] = {}
    hyps: dict[str, list[str]] = {}
    translated = translate_subsets(data_bin, checkpoint, out_dir, list(subsets), decode,
                                   user_dir=user_dir, extra=list(extra))  # fmt: skip
    for subset, name in subsets.items():
        ref = raw / f"{name}.en"
        base_hyp = baseline_dir / name / "hyp.txt" if baseline_dir else None
        single[name] = evaluate_checkpoint(
            data_bin,
            checkpoint,
            out_dir / name,
            ref=ref if ref.is_file() else None,
            baseline_hyp=base_hyp if base_hyp and base_hyp.is_file() else None,
            subset=subset,
            scoring=scoring,
            translated=translated[subset],
        )
        hyps[name] = read_lines(out_dir / name / "hyp.txt")
    sets = score_sets(hyps, refs_dir, lowercase=True)
    result = MultiRefScores(
        average=sets.average, sets=sets.sets, subsets=subsets,
        signature=next(iter(sets.sets.values())).signature, references=str(refs_dir),
        checkpoint=str(checkpoint), training=checkpoint_training(Path(checkpoint)),
        single_ref=single,
    )  # fmt: skip
    out_dir.mkdir(parents=True, exist_ok=True)
    write_scores(out_dir / "scores.json", result)
    return result
