"""Translate a test set with a checkpoint and score it the ways the papers did.

fairseq-generate (beam) -> hypotheses in order -> BPE removal -> Moses detokenisation
(CJK spaces removed for Chinese) -> :func:`localnmt.evaluation.scoring.score`: SacreBLEU with
signature, tokenized BLEU (multi-bleu style, German compound splitting), BLEU by
source-length bucket, and against a baseline: paired bootstrap significance and n-gram
precision gaps. Writes ``hyp.txt``, ``ref.txt``
and ``scores.json`` in the output directory::

    python -m localnmt.runs.evaluate --data-bin BIN --checkpoint ckpt.pt --out DIR \
        [--ref raw/test.de] [--src raw/test.en] [--baseline-hyp base/hyp.txt] [--user-dir D]
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
import json
from collections.abc import Sequence
from pathlib import Path

from localnmt.data.layout import count_lines
from localnmt.data.metadata import post_processing
from localnmt.data.steps import DataError
from localnmt.evaluation.breakdown import parse_edges
from localnmt.evaluation.postprocess import postprocess
from localnmt.evaluation.scoring import read_lines, score, summary, write_lines
from localnmt.runs.generate import (
    generate_command,
    infer_langs,
    ordered,
    parse_generate,
    run_generate,
)


def translate(
    data_bin: Path,
    checkpoint: Path,
    out_dir: Path,
    *,
    subset: str = "test",
    bpe: str | None = None,
    detok: str | None = None,
    beam: int = 4,
    lenpen: float = 0.6,
    user_dir: str | None = None,
    extra: list[str] | None = None,
) -> dict[str, list[str]]:
    """Generate and post-process; returns ``hyp``, ``ref_gen`` and ``src_gen`` line lists."""
    cmd = _subset_command(data_bin, checkpoint, subset, beam, lenpen, user_dir, extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    gen_out = out_dir / "generate.out"
    run_generate(cmd, gen_out, out_dir / "generate.log")
    return read_generation(gen_out.read_text(encoding="utf-8"), data_bin, subset, bpe, detok)


def _subset_command(
    data_bin: Path, checkpoint: Path, subset: str, beam: int, lenpen: float,
    user_dir: str | None, extra: list[str] | None,
) -> list[str]:  # fmt: skip
    """The fairseq-generate command of one subset, languages read from the data-bin."""
    src, tgt = infer_langs(data_bin, subset)
    return generate_command(data_bin, checkpoint, subset=subset, beam=beam, lenpen=lenpen,
                            user_dir=user_dir, source_lang=src, target_lang=tgt,
                            extra=extra)  # fmt: skip


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
    *,
    bpe: str | None = None,
    detok: str | None = None,
    beam: int = 4,
    lenpen: float = 0.6,
    user_dir: str | None = None,
    extra: list[str] | None = None,
) -> dict[str, dict[str, list[str]]]:
    """:func:`translate` of several subsets in one fairseq process (one start-up); outputs
    ``out_dir/generate-<subset>.txt``. Returns the line lists per subset."""
    cmd = _subset_command(data_bin, checkpoint, subsets[0], beam, lenpen, user_dir, extra)
    entry = cmd.index("generate")
    cmd = [*cmd[:entry], "generate-subsets", ",".join(subsets), str(out_dir), *cmd[entry + 1 :]]
    out_dir.mkdir(parents=True, exist_ok=True)
    run_generate(cmd, out_dir / "generate.log", out_dir / "generate.err")
    return {
        s: read_generation(
            (out_dir / f"generate-{s}.txt").read_text(encoding="utf-8"), data_bin, s, bpe, detok
        )
        for s in subsets
    }


def evaluate_checkpoint(
    data_bin: Path,
    checkpoint: Path,
    out_dir: Path,
    *,
    ref: Path | None = None,
    src: Path | None = None,
    baseline_hyp: Path | None = None,
    translated: dict[str, list[str]] | None = None,
    **kwargs,
) -> dict:
    """Translate (unless ``translated`` gives :func:`translate`'s output), score and write
    ``hyp.txt``, ``ref.txt`` and ``scores.json``."""
    scoring = {k: kwargs.pop(k) for k in ("edges", "bootstrap_samples", "seed") if k in kwargs}
    # the given files first: a missing or undecodable one stops before any translation
    given_refs = read_lines(ref) if ref else None
    given_sources = read_lines(src) if src else None
    baseline = read_lines(baseline_hyp) if baseline_hyp else None
    if translated is None:
        out = translate(Path(data_bin), Path(checkpoint), Path(out_dir), **kwargs)
    else:
        out = translated
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    src_lang, tgt = infer_langs(Path(data_bin), kwargs.get("subset", "test"))
    refs = out["ref_gen"] if given_refs is None else given_refs
    sources = out["src_gen"] if given_sources is None else given_sources
    result = score(out["hyp"], refs, tgt, sources=sources, source_lang=src_lang,
                   baseline_hyps=baseline, **scoring)  # fmt: skip
    result.update(
        checkpoint=str(checkpoint),
        target_lang=tgt,
        references=str(ref) if ref else "fairseq T- lines (post-processed)",
    )
    write_lines(Path(out_dir) / "hyp.txt", out["hyp"])
    write_lines(Path(out_dir) / "ref.txt", refs)
    (Path(out_dir) / "scores.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    return result


def _average(run_dir: Path, n: int, by_update: bool, out: Path) -> Path:
    """Average the last ``n`` checkpoints of ``run_dir`` into ``out/checkpoint_avg.pt``."""
    from localnmt.runs.average_checkpoints import last_n_checkpoints, write_average

    paths = last_n_checkpoints(run_dir, n, by_update=by_update)
    return write_average(paths, out / "checkpoint_avg.pt")


def main(argv: list[str] | None = None) -> None:
    """CLI: evaluate a checkpoint, or score an existing hypothesis file with ``--hyp``."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
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
    recorded = " (default: as the data-bin's localnmt_data.json records; else %s)"
    p.add_argument("--bpe", choices=["subword_nmt", "sentencepiece", "none"],
                   help="subword removal" + recorded % "subword_nmt")  # fmt: skip
    p.add_argument("--detok", choices=["moses", "none"],
                   help="detokeniser" + recorded % "moses")  # fmt: skip
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6)
    p.add_argument("--user-dir", default="auto", help="plugin directory; auto (default) or none")
    p.add_argument("--average-dir", type=Path, help="average the last checkpoints of this run")
    p.add_argument("--average", type=int, default=5, help="with --average-dir: how many")
    p.add_argument(
        "--by-update", action="store_true", help="with --average-dir: update checkpoints"
    )
    p.add_argument("--length-buckets", default="20,40", help="bucket edges")
    p.add_argument("--bootstrap-samples", type=int, default=1000)
    p.add_argument("--seed", type=int, default=12345)
    args, extra = p.parse_known_args(argv)
    if args.average_dir:
        try:
            args.checkpoint = _average(args.average_dir, args.average, args.by_update, args.out)
        except (OSError, ValueError) as err:
            p.error(str(err))
    scoring = {
        "edges": parse_edges(args.length_buckets),
        "bootstrap_samples": args.bootstrap_samples,
        "seed": args.seed,
    }
    if args.hyp:
        if not (args.ref and args.target_lang):
            p.error("--hyp needs --ref and --target-lang")
        if args.src and not args.source_lang:
            p.error("--src needs --source-lang (length buckets count its own words)")
        try:
            baseline = read_lines(args.baseline_hyp) if args.baseline_hyp else None
            sources = read_lines(args.src) if args.src else None
            hyps, refs = read_lines(args.hyp), read_lines(args.ref)
        except DataError as err:
            p.error(str(err))
        result = score(
            hyps,
            refs,
            args.target_lang,
            sources=sources,
            source_lang=args.source_lang,
            baseline_hyps=baseline,
            **scoring,
        )
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "scores.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        if not (args.data_bin and args.checkpoint):
            p.error("give --data-bin and --checkpoint (or --average-dir), or --hyp")
        from localnmt.paths import resolve_user_dir

        try:
            result = evaluate_checkpoint(
                args.data_bin,
                args.checkpoint,
                args.out,
                ref=args.ref,
                src=args.src,
                baseline_hyp=args.baseline_hyp,
                subset=args.subset,
                bpe=args.bpe,
                detok=args.detok,
                beam=args.beam,
                lenpen=args.lenpen,
                user_dir=resolve_user_dir(args.user_dir),
                extra=extra,
                **scoring,
            )
        except DataError as err:
            p.error(str(err))
    print(summary(result))


if __name__ == "__main__":
    main()
