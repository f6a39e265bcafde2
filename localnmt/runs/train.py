"""Train one model with the papers' hyper-parameters (``localnmt-train``).

    localnmt-train --data BIN --save-dir DIR [--arch ARCH] [--size base|big|cpu|tiny]
        [--max-tokens N] [--max-update N] [--layers N] [--gpus N] [--cpu] [--fp16|--bf16]
        [--tokens-per-update N] [--separate-vocab]
        [--nnodes N --node-rank R --master-addr HOST --master-port PORT]
        [--user-dir DIR|auto|none] [--log FILE] [--dry-run] [--start-over] [--accept-lost-updates]
        [--evaluate [--subset test] [--beam 4] [--lenpen 0.6] ...] [-- EXTRA fairseq-train ARGS]

(also ``python -m localnmt.runs.train`` and ``scripts/train.sh``). One GPU: one process.
Several GPUs (or nodes): ``torch.distributed.run`` (torchrun), one process per GPU, fairseq's
env:// initialisation. No GPU: ``--cpu``. ``--update-freq`` is chosen so that
world_size x max_tokens x update_freq >= ``--tokens-per-update`` (default 8 GPUs x 4096 =
32768 tokens; base/big recipes, :func:`localnmt.runs.recipes.train_args`). ``--separate-vocab``:
separate source/target dictionaries (share the decoder's input/output embeddings only).
The fairseq process is :mod:`localnmt.runs.fairseq_entry` (fairseq-train with the torch >= 2.6
checkpoint fix); its output goes to the terminal and to ``--log`` (default DIR/train.log).
A rerun continues from ``DIR/checkpoint_last.pt``, as fairseq-train does, after checking that
it is this run's (the data-bin's dictionaries, the same model settings;
:mod:`localnmt.runs.resume_checks`): ``--start-over`` moves the checkpoints of other settings
aside and trains afresh.

``--evaluate`` then translates the test subset with beam search and scores it with SacreBLEU
against the raw references the data preparation keeps beside the data-bin, into
``DIR/eval/`` (``hyp.txt``, ``scores.json``); missing references stop the command before it
trains.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from localnmt import locks
from localnmt.errors import UsageError, entry_point
from localnmt.runs.checkpoint_files import ACCEPT_LOSS
from localnmt.runs.launch import check_data_bin, fairseq_args, launch_command, world_size
from localnmt.runs.layout import RunLayout
from localnmt.runs.options import add_options, from_options, split_extra
from localnmt.runs.resume_checks import preflight, start_over
from localnmt.runs.run_specs import DecodeSpec, TrainSpec

#: the decoding options ``--evaluate`` takes (``--max-tokens`` is the training batch here)
DECODE_OPTIONS = ("beam", "lenpen", "max_len_a", "max_len_b", "bpe", "detok")


def build_parser() -> argparse.ArgumentParser:
    """``localnmt-train``'s options (fairseq-train arguments go after ``--``)."""
    p = argparse.ArgumentParser(prog="localnmt-train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_options(p, TrainSpec)
    p.add_argument("--log", type=Path, help="log file (default: SAVE_DIR/train.log)")
    p.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    p.add_argument("--start-over", action="store_true",
                   help="move SAVE_DIR's checkpoints to SAVE_DIR/stale/<date>/ (kept, never "
                   "deleted) and train afresh, e.g. with other model settings")  # fmt: skip
    p.add_argument("--accept-lost-updates", action="store_true",
                   help="resume from an older checkpoint even when the newest ones are "
                   "damaged and many updates would be trained again")  # fmt: skip
    evaluation = p.add_argument_group("evaluation (--evaluate)")
    evaluation.add_argument("--evaluate", action="store_true",
                            help="after training, translate and score the test subset")  # fmt: skip
    evaluation.add_argument("--subset", default="test", help="the subset to score")
    add_options(evaluation, DecodeSpec, only=DECODE_OPTIONS)
    return p


def parse_args(argv: list[str] | None = None) -> tuple[TrainSpec, argparse.Namespace]:
    """The spec and the launcher-only options (``log``, ``dry_run``, evaluation)."""
    own, extra = split_extra(list(sys.argv[1:] if argv is None else argv))
    ns = build_parser().parse_args(own)
    return from_options(TrainSpec, ns, extra=tuple(extra)), ns


def test_set(spec: TrainSpec, subset: str):
    """The raw references and sources of ``subset`` beside the data-bin; stops
    (:class:`UsageError`) before training when the references are missing."""
    from localnmt.data.corpus_layout import raw_file
    from localnmt.runs.experiment import TestSet
    from localnmt.runs.generate import infer_langs

    try:
        src, tgt = infer_langs(Path(spec.data), subset)
    except FileNotFoundError as err:
        raise UsageError(f"--evaluate: {err}") from None
    ref, source = raw_file(Path(spec.data), subset, tgt), raw_file(Path(spec.data), subset, src)
    if not ref.is_file():
        raise UsageError(f"--evaluate: no raw references {ref} (the data_prep/ scripts keep "
                         "them beside the data-bin)")  # fmt: skip
    return TestSet(subset, ref=ref, src=source if source.is_file() else None)


@entry_point("localnmt-train")
def main(argv: list[str] | None = None) -> int:
    """CLI entry point (``localnmt-train``)."""
    from localnmt.runs.experiment import TranslationEvaluation, train_and_score

    spec, ns = parse_args(argv)
    gpus = spec.gpus_per_node()
    cmd = launch_command(spec, gpus)
    if ns.dry_run:
        print(shlex.join(cmd))
        return 0
    check_data_bin(spec.data)
    if ns.accept_lost_updates:
        spec = replace(spec, extra=(*spec.extra, ACCEPT_LOSS))
    with locks.hold(Path(spec.save_dir)):
        if ns.start_over and (aside := start_over(Path(spec.save_dir))) is not None:
            print(f"localnmt-train: --start-over: moved the checkpoints of {spec.save_dir} to "
                  f"{aside}", file=sys.stderr, flush=True)  # fmt: skip
        preflight(fairseq_args(spec, gpus), ns.accept_lost_updates)
    evaluation = None  # the references are checked before training
    if ns.evaluate:
        decode = from_options(DecodeSpec, ns, only=DECODE_OPTIONS)
        evaluation = TranslationEvaluation(test_set(spec, ns.subset), decode)
    layout = RunLayout.for_save_dir(Path(spec.save_dir), ns.log)
    print(f"localnmt-train: world size {world_size(spec, gpus)} (gpus/node {gpus}, nodes "
          f"{spec.nnodes}), log {layout.train_log}", file=sys.stderr, flush=True)  # fmt: skip
    result = train_and_score(spec, layout, evaluation=evaluation, echo=True,
                             log=lambda m: print(m, file=sys.stderr, flush=True))  # fmt: skip
    if result.scores is not None:
        print(result.scores.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
