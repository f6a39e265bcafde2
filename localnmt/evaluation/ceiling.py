"""The BLEU ceiling that the target side's preprocessing puts on scores against raw references.

A model trained on tokenised (and Moses punctuation-normalised) targets can at best produce
``detokenise(tokenise(reference))``; SacreBLEU of that against the raw reference is the highest
score any such model can get. Moses normalisation rewrites quotes, dashes and spaces before
punctuation, so the ceiling is below 100; without it (``--no-target-normalize`` in the data
pipelines) the round trip is usually exact::

    python -m localnmt.evaluation.ceiling --ref W/raw/test.de --lang de
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from localnmt.data.text_tokenize import tokenizer_for
from localnmt.errors import entry_point
from localnmt.evaluation.metrics import BleuResult, sacrebleu_score
from localnmt.evaluation.postprocess import detokenize
from localnmt.evaluation.scoring import read_lines


def round_trip(refs: Sequence[str], lang: str, normalize: bool = True) -> list[str]:
    """What a perfect model's detokenised output is: the pipeline's tokeniser (Moses with or
    without punctuation normalisation, jieba, janome), then the evaluation's detokeniser."""
    tokenize = tokenizer_for(lang, normalize=normalize)
    return [detokenize(tokenize(r), lang) for r in refs]


def ceiling(refs: Sequence[str], lang: str, normalize: bool = True) -> tuple[BleuResult, int]:
    """SacreBLEU of :func:`round_trip` against the raw references, and how many lines the
    round trip changed."""
    trip = round_trip(refs, lang, normalize)
    return sacrebleu_score(trip, refs, lang), sum(h != r for h, r in zip(trip, refs))


@entry_point("python -m localnmt.evaluation.ceiling")
def main(argv: list[str] | None = None) -> int:
    """Print the ceiling with and without target-side punctuation normalisation."""
    p = argparse.ArgumentParser(
        prog="python -m localnmt.evaluation.ceiling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--ref", type=Path, required=True, help="raw reference file")
    p.add_argument("--lang", required=True, help="its language")
    args = p.parse_args(argv)  # fmt: skip
    refs = read_lines(args.ref)  # a missing or unreadable file: one line, exit 2
    for normalize in (True, False):
        result, changed = ceiling(refs, args.lang, normalize)
        print(f"{'normalised  ' if normalize else 'unnormalised'} ceiling {result.score:.2f} "
              f"({changed} of {len(refs)} lines changed; {result.signature})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
