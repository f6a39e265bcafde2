"""Translate a test set with a checkpoint and score it the ways the papers did (the command
``python -m localnmt.runs.evaluate``, ``scripts/evaluate.sh``; scoring itself, given the
text, is :mod:`localnmt.evaluation`).

fairseq-generate (beam search as :class:`~localnmt.runs.run_specs.DecodeSpec` says) -> hypotheses
in order -> BPE removal -> Moses detokenisation
(CJK spaces removed for Chinese) -> :func:`localnmt.evaluation.scoring.score`: SacreBLEU with
signature, tokenized BLEU (multi-bleu style, German compound splitting), BLEU by
source-length bucket, and against a baseline: paired bootstrap significance and n-gram
precision gaps. Writes ``hyp.txt``, ``ref.txt``
and ``scores.json`` in the output directory::

    python -m localnmt.runs.evaluate --data-bin BIN --checkpoint ckpt.pt --out DIR \
        [--ref raw/test.de] [--src raw/test.en] [--baseline-hyp base/hyp.txt] [--user-dir D] \
        [--beam 4] [--lenpen 0.6] [--max-len-a 0] [--max-len-b 200] [--bpe ...] [--detok ...]
    python -m localnmt.runs.evaluate --average-dir CKPT_DIR --average 5 [--by-update] \
        --data-bin BIN --out DIR ...
    python -m localnmt.runs.evaluate --hyp hyp.txt --ref ref.txt --target-lang de --out DIR \
        [--src raw/test.en --source-lang en]

``--average-dir`` averages the last N checkpoints of a run into ``DIR/checkpoint_avg.pt`` and
evaluates that. ``--user-dir`` defaults to this plugin when it imports (``none``: no plugin).
Arguments not listed here go to fairseq-generate.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localnmt.data.corpus_layout import count_lines
from localnmt.data.metadata import post_processing
from localnmt.errors import DataError, UsageError, entry_point
from localnmt.evaluation.breakdown import parse_edges
from localnmt.evaluation.postprocess import postprocess
from localnmt.evaluation.results import AnyScores, Scored, Scores, TrainingRecord, write_scores
from localnmt.evaluation.scoring import (
    DEFAULT_SCORING,
    ScoringOptions,
    read_lines,
    score,
    write_lines,
)
from localnmt.runs.eval_checks import check_fits_model, check_line_counts
from localnmt.runs.generate import (
    generate_command,
    infer_langs,
    ordered,
    parse_generate,
    run_generate,
)
from localnmt.runs.options import add_options, from_options
from localnmt.runs.run_specs import DEFAULT_DECODING, DecodeSpec


def translate(
    data_bin: Path,
    checkpoint: Path,
    out_dir: Path,
    decode: DecodeSpec = DEFAULT_DECODING,
    *,
    subset: str = "test",
    user_dir: str | None = None,
    extra: list[str] | None = None,
) -> dict[str, list[str]]:
    """Generate and post-process; returns ``hyp``, ``ref_gen`` and ``src_gen`` line lists."""
    cmd = _subset_command(data_bin, checkpoint, subset, decode, user_dir, extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    gen_out = out_dir / "generate.out"
    src, tgt = infer_langs(data_bin, subset)
    run_generate(cmd, gen_out, out_dir / "generate.log", count_lines(data_bin, subset, src, tgt))
    return read_generation(gen_out.read_text(encoding="utf-8"), data_bin, subset, decode.bpe,
                           decode.detok)  # fmt: skip


def _subset_command(
    data_bin: Path, checkpoint: Path, subset: str, decode: DecodeSpec, user_dir: str | None,
    extra: list[str] | None,
) -> list[str]:  # fmt: skip
    """The fairseq-generate command of one subset, languages read from the data-bin."""
    src, tgt = infer_langs(data_bin, subset)
    return generate_command(data_bin, checkpoint, decode, subset=subset, user_dir=user_dir,
                            source_lang=src, target_lang=tgt, extra=extra)  # fmt: skip


def read_generation(
    text: str, data_bin: Path, subset: str, bpe: str | None = None, detok: str | None = None
) -> dict[str, list[str]]:
    """``hyp``, ``ref_gen`` and ``src_gen`` of fairseq-generate output, post-processed, in
    test-set order (every sentence of the subset must be there). ``bpe`` / ``detok``: None
    = as the data preparation recorded (:func:`localnmt.data.metadata.post_processing`)."""
    bpe, detok = post_processing(data_bin, bpe, detok)
    src, tgt = infer_langs(data_bin, subset)
    n = count_lines(data_bin, subset, src, tgt)
    return {
        "hyp": [postprocess(h, tgt, bpe, detok) for h in ordered(parse_generate(text, "H"), n)],
        "ref_gen": [postprocess(t, tgt, bpe, detok) for t in ordered(parse_generate(text, "T"), n)],
        "src_gen": [postprocess(s, src, bpe, detok) for s in ordered(parse_generate(text, "S"), n)],
    }


def translate_subsets(
    data_bin: Path,
    checkpoint: Path,
    out_dir: Path,
    subsets: Sequence[str],
    decode: DecodeSpec = DEFAULT_DECODING,
    *,
    user_dir: str | None = None,
    extra: list[str] | None = None,
) -> dict[str, dict[str, list[str]]]:
    """:func:`translate` of several subsets in one fairseq process (one start-up); outputs
    ``out_dir/generate-<subset>.txt``. Returns the line lists per subset."""
    cmd = _subset_command(data_bin, checkpoint, subsets[0], decode, user_dir, extra)
    entry = cmd.index("generate")
    cmd = [*cmd[:entry], "generate-subsets", ",".join(subsets), str(out_dir), *cmd[entry + 1 :]]
    out_dir.mkdir(parents=True, exist_ok=True)
    run_generate(cmd, out_dir / "generate.log", out_dir / "generate.err")
    return {
        s: read_generation(
            (out_dir / f"generate-{s}.txt").read_text(encoding="utf-8"),
            data_bin,
            s,
            decode.bpe,
            decode.detok,
        )  # fmt: skip
        for s in subsets
    }


@dataclass(frozen=True)
class TestSet:
    """What a trained model is scored on."""

    subset: str = "test"
    #: raw references (None: fairseq's post-processed target lines)
    ref: Path | None = None
    #: raw sources, for BLEU by source length (None: fairseq's source lines)
    src: Path | None = None
    #: NIST's four references per set (``refs/subsets.json``): every test subset is decoded
    nist_refs: Path | None = None
    #: the baseline run's evaluation folder: its hypotheses are the paired test's reference
    baseline: Path | None = None

    def inputs(self) -> list[Path | None]:
        """The files whose contents decide the scores (for the step's fingerprint)."""
        base = self.baseline / "hyp.txt" if self.baseline and not self.nist_refs else self.baseline
        return [self.ref, self.src, self.nist_refs, base]


def score_checkpoint(
    data_bin: Path, checkpoint: Path, out_dir: Path, test: TestSet,
    decode: DecodeSpec = DEFAULT_DECODING, *, user_dir: str | None = None,
) -> AnyScores:  # fmt: skip
    """Translate ``test`` with ``checkpoint`` and score it into ``out_dir``: every NIST set
    against its four references (:func:`~localnmt.runs.nist_eval.evaluate_nist`), else
    :func:`evaluate_checkpoint`."""
    if test.nist_refs is not None:
        from localnmt.runs.nist_eval import evaluate_nist

        return evaluate_nist(data_bin, checkpoint, out_dir, test.nist_refs, decode,
                             baseline_dir=test.baseline, user_dir=user_dir)  # fmt: skip
    baseline = test.baseline / "hyp.txt" if test.baseline else None
    return evaluate_checkpoint(data_bin, checkpoint, out_dir, ref=test.ref, src=test.src,
                               baseline_hyp=baseline, subset=test.subset, decode=decode,
                               user_dir=user_dir)  # fmt: skip


@dataclass
class GivenFiles:
    """The files given beside the data-bin (``--ref``, ``--src``, ``--baseline-hyp``), read
    (None: not given)."""

    paths: tuple[Path | None, Path | None, Path | None]
    refs: list[str] | None
    sources: list[str] | None
    baseline: list[str] | None

    @classmethod
    def read(cls, ref: Path | None, src: Path | None, baseline_hyp: Path | None) -> GivenFiles:
        """Read them: a missing or undecodable file is a DataError naming it."""
        paths = (ref, src, baseline_hyp)
        return cls(paths, *(read_lines(p) if p else None for p in paths))

    def check(self, expected: int, expected_what: str) -> GivenFiles:
        """Each has ``expected`` lines, one per test sentence (``expected_what`` says whose
        count that is), and there is at least one; else a DataError naming the file."""
        options = zip(("--ref", "--src", "--baseline-hyp"), self.paths,
                      (self.refs, self.sources, self.baseline))  # fmt: skip
        check_line_counts(expected, expected_what, [o for o in options if o[2] is not None])
        return self


def subset_size(data_bin: Path, subset: str) -> tuple[int, str]:
    """Sentences of a binarised subset, and the words that name it in messages."""
    n = count_lines(Path(data_bin), subset, *_langs(Path(data_bin), subset))
    return n, f"the {subset} subset of {data_bin}"


def evaluate_checkpoint(
    data_bin: Path,
    checkpoint: Path,
    out_dir: Path,
    *,
    ref: Path | None = None,
    src: Path | None = None,
    baseline_hyp: Path | None = None,
    subset: str = "test",
    decode: DecodeSpec = DEFAULT_DECODING,
    user_dir: str | None = None,
    extra: Sequence[str] = (),
    scoring: ScoringOptions = DEFAULT_SCORING,
    translated: dict[str, list[str]] | None = None,
) -> Scores:
    """Translate (unless ``translated`` gives :func:`translate`'s output), score and write
    ``hyp.txt``, ``ref.txt`` and ``scores.json``.

    Everything that can be checked is checked before decoding, each problem a
    :class:`~localnmt.errors.DataError` of one line: the given files exist, decode and
    have one line per test sentence; the checkpoint loads; no test sentence is longer than
    the model's positions."""
    given = GivenFiles.read(ref, src, baseline_hyp)
    src_lang, tgt = _langs(Path(data_bin), subset)
    if translated is None:
        given.check(*subset_size(Path(data_bin), subset))
        check_fits_model(Path(data_bin), subset, src_lang, tgt, Path(checkpoint), extra)
        out = translate(Path(data_bin), Path(checkpoint), Path(out_dir), decode, subset=subset,
                        user_dir=user_dir, extra=list(extra))  # fmt: skip
    else:
        given.check(len(translated["hyp"]), f"the translation of {subset}")
        out = translated
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    refs = out["ref_gen"] if given.refs is None else given.refs
    sources = out["src_gen"] if given.sources is None else given.sources
    scored = Scored(str(checkpoint), checkpoint_training(Path(checkpoint)), tgt,
                    str(ref) if ref else "fairseq T- lines (post-processed)")  # fmt: skip
    result = score(out["hyp"], refs, tgt, sources=sources, source_lang=src_lang,
                   baseline_hyps=given.baseline, options=scoring, scored=scored)  # fmt: skip
    write_lines(Path(out_dir) / "hyp.txt", out["hyp"])
    write_lines(Path(out_dir) / "ref.txt", refs)
    write_scores(Path(out_dir) / "scores.json", result)
    return result


def checkpoint_training(checkpoint: Path) -> TrainingRecord | None:
    """How far ``checkpoint`` was trained (:func:`localnmt.provenance.training_record`:
    its updates, its run's ``max_update``, whether the run finished, judged by it and by the
    ``checkpoint_last.pt`` beside it); None when it cannot be read (a test's stand-in)."""
    from localnmt.provenance import training_record
    from localnmt.safe_load import CheckpointError, load_checkpoint

    try:
        state = load_checkpoint(checkpoint, mmap=True)
    except CheckpointError:
        return None
    last_path = checkpoint.parent / "checkpoint_last.pt"
    last = None
    if last_path.is_file() and last_path.resolve() != checkpoint.resolve():
        try:
            last = load_checkpoint(last_path, mmap=True)
        except CheckpointError:
            last = None
    return TrainingRecord.from_json(training_record(checkpoint, state, last))


def _langs(data_bin: Path, subset: str) -> tuple[str, str]:
    """:func:`~localnmt.runs.generate.infer_langs`, a missing subset as a DataError."""
    try:
        return infer_langs(data_bin, subset)
    except FileNotFoundError as err:
        raise DataError(f"{err}: give the data-bin of the test set (--data-bin)") from None


def score_files(args: argparse.Namespace, scoring: ScoringOptions) -> Scores:
    """``--hyp`` mode: score a hypothesis file; every file is checked before scoring."""
    hyps = read_lines(args.hyp)
    given = GivenFiles.read(args.ref, args.src, args.baseline_hyp)
    given.check(len(hyps), f"--hyp {args.hyp}")
    result = score(hyps, given.refs, args.target_lang, sources=given.sources,
                   source_lang=args.source_lang, baseline_hyps=given.baseline,
                   options=scoring)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    write_scores(args.out / "scores.json", result)
    return result


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m localnmt.runs.evaluate``."""
    p = argparse.ArgumentParser(prog="python -m localnmt.runs.evaluate", description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    p.add_argument("--data-bin", type=Path)
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--hyp", type=Path, help="score this detokenised file instead of generating")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ref", type=Path, help="raw references (default: fairseq T- lines)")
    p.add_argument("--src", type=Path, help="raw sources, for length buckets")
    p.add_argument("--target-lang", help="with --hyp")
    p.add_argument("--source-lang", help="with --hyp --src: segments the sources for buckets")
    p.add_argument("--baseline-hyp", type=Path)
    p.add_argument("--subset", default="test")
    add_options(p.add_argument_group("decoding"), DecodeSpec)
    p.add_argument("--user-dir", default="auto", help="plugin directory; auto (default) or none")
    p.add_argument("--average-dir", type=Path, help="average the last checkpoints of this run")
    p.add_argument("--average", type=int, default=5, help="with --average-dir: how many")
    p.add_argument(
        "--by-update", action="store_true", help="with --average-dir: update checkpoints"
    )
    p.add_argument("--length-buckets", default="20,40", help="bucket edges")
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=12345)
    return p


@entry_point("evaluate")
def main(argv: list[str] | None = None) -> None:
    """CLI: evaluate a checkpoint, or score an existing hypothesis file with ``--hyp``. A
    problem with the inputs is one message, exit 2, before anything is decoded."""
    p = parser()
    args, extra = p.parse_known_args(argv)
    if args.hyp and not (args.ref and args.target_lang):
        p.error("--hyp needs --ref and --target-lang")
    if args.hyp and args.src and not args.source_lang:
        p.error("--src needs --source-lang (length buckets count its own words)")
    if not args.hyp and not (args.data_bin and (args.checkpoint or args.average_dir)):
        p.error("give --data-bin and --checkpoint (or --average-dir), or --hyp")
    scoring = ScoringOptions(tuple(parse_edges(args.length_buckets)), args.bootstrap_samples,
                             args.seed)  # fmt: skip
    try:
        if args.hyp:
            result = score_files(args, scoring)
        else:
            result = evaluate_run(args, extra, scoring)
    except DataError as err:
        raise UsageError(str(err)) from None
    print(result.summary())


def evaluate_run(args: argparse.Namespace, extra: list[str], scoring: ScoringOptions) -> Scores:
    """Checkpoint mode: (average,) translate and score, the given files checked first."""
    from localnmt.paths import resolve_user_dir
    from localnmt.runs.average_checkpoints import average_last

    if args.average_dir:
        if args.ref or args.src or args.baseline_hyp:  # checked before the (long) averaging
            given = GivenFiles.read(args.ref, args.src, args.baseline_hyp)
            given.check(*subset_size(args.data_bin, args.subset))
        try:
            args.checkpoint = average_last(args.average_dir, args.average, args.by_update,
                                           args.out / "checkpoint_avg.pt")  # fmt: skip
        except (OSError, ValueError) as err:
            raise DataError(str(err)) from None
    return evaluate_checkpoint(
        args.data_bin,
        args.checkpoint,
        args.out,
        ref=args.ref,
        src=args.src,
        baseline_hyp=args.baseline_hyp,
        subset=args.subset,
        decode=from_options(DecodeSpec, args),
        user_dir=resolve_user_dir(args.user_dir),
        extra=extra,
        scoring=scoring,
    )


if __name__ == "__main__":
    main()
