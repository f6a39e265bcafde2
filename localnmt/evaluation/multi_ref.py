"""Multi-reference BLEU (NIST Zh-En: 4 references per set, BLEU averaged over MT03–MT08).

SacreBLEU scores each hypothesis against all its references at once (n-gram counts clipped
by the maximum count over references, brevity penalty with the closest reference length), as
multi-bleu.perl does. The GMM paper reports case-insensitive BLEU (lower-cased English), so
``lowercase=True`` is the default here.

    python -m localnmt.evaluation.multi_ref --refs-dir WORK/refs \
        --hyp mt03=hyp.mt03.txt --hyp mt04=hyp.mt04.txt ... [--cased] [--json OUT]

With :mod:`localnmt.data.nist_zh_en`'s layout (``WORK/refs/subsets.json``: fairseq subset
``test`` = MT03, ``test1`` = MT04, ``test2`` = MT05, ``test3`` = MT06, ``test4`` = MT08),
decode each subset with ``python -m localnmt.runs.evaluate --data-bin WORK/data-bin
--checkpoint CKPT --subset test1 --ref WORK/raw/mt04.en --out ev/mt04`` (single-reference
scores, and the detokenised ``ev/mt04/hyp.txt``), then pass ``--hyp mt04=ev/mt04/hyp.txt``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU

from localnmt.errors import entry_point
from localnmt.evaluation.inputs import ScoringInputError
from localnmt.evaluation.metrics import BleuResult
from localnmt.evaluation.scoring import read_lines


def multi_ref_bleu(
    hyps: Sequence[str], refs: Sequence[Sequence[str]], *, lowercase: bool = True,
    tokenize: str = "13a",
) -> BleuResult:  # fmt: skip
    """Corpus BLEU of ``hyps`` against reference streams ``refs[r][i]`` (r-th ref of line i)."""
    if not refs:
        raise ScoringInputError("no references")
    for r, stream in enumerate(refs):
        if len(stream) != len(hyps):
            raise ScoringInputError(
                f"reference {r} has {len(stream)} lines, hypotheses {len(hyps)}"
            )
    if not hyps:
        raise ScoringInputError("no hypotheses and no references: nothing to score")
    metric = BLEU(lowercase=lowercase, tokenize=tokenize)
    score = metric.corpus_score(list(hyps), [list(s) for s in refs])
    return BleuResult(
        score=score.score,
        precisions=list(score.precisions),
        bp=score.bp,
        sys_len=score.sys_len,
        ref_len=score.ref_len,
        signature=str(metric.get_signature()),
        text=str(score),
    )


def read_refs(refs_dir: Path, name: str) -> list[list[str]]:
    """``refs_dir/<name>.ref0``, ``.ref1``, ... (as many as exist, at least one)."""
    streams, r = [], 0
    while (p := Path(refs_dir) / f"{name}.ref{r}").is_file():
        streams.append(read_lines(p))  # lines end at \n only, as everywhere in the project
        r += 1
    if not streams:
        raise FileNotFoundError(f"no references {name}.ref0.. in {refs_dir}")
    return streams


@dataclass(frozen=True)
class SetScores:
    """Multi-reference BLEU per set and their unweighted mean (the paper's "average")."""

    sets: dict[str, BleuResult]
    average: float

    def to_json(self) -> dict:
        """``{"sets": {name: BLEU}, "average": ...}`` (``--json``)."""
        return {"sets": {k: v.to_dict() for k, v in self.sets.items()}, "average": self.average}


def score_sets(
    hyps: Mapping[str, Sequence[str]], refs_dir: Path, *, lowercase: bool = True
) -> SetScores:
    """Per-set multi-reference BLEU and their unweighted mean (the paper's "average")."""
    per_set = {
        name: multi_ref_bleu(h, read_refs(refs_dir, name), lowercase=lowercase)
        for name, h in hyps.items()
    }
    average = sum(r.score for r in per_set.values()) / len(per_set) if per_set else float("nan")
    return SetScores(per_set, average)


@entry_point("multi_ref")
def main(argv: list[str] | None = None) -> int:
    """CLI: score ``--hyp NAME=FILE`` (detokenised) against ``REFS_DIR/NAME.ref*``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refs-dir", type=Path, required=True)
    ap.add_argument("--hyp", action="append", required=True, metavar="NAME=FILE")
    ap.add_argument("--cased", action="store_true", help="case-sensitive BLEU")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    hyps = {}
    for item in args.hyp:
        name, _, path = item.partition("=")
        hyps[name] = read_lines(Path(path))
    res = score_sets(hyps, args.refs_dir, lowercase=not args.cased)
    for name, r in res.sets.items():
        print(f"{name}\t{r.score:.2f}\t{r.text}")
    print(f"average\t{res.average:.2f}")
    if args.json:
        args.json.write_text(json.dumps(res.to_json(), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
