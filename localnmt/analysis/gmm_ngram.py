"""N-gram precision gap (Zhang & Feng 2021, Figure 6) and BLEU by source length (Figure 7).

``python -m localnmt.analysis.gmm_ngram --refs R --baseline B --system S --sources X
--out PREFIX`` takes detokenised hypothesis files (one sentence a line, corpus order) and
calls the shared functions of :mod:`localnmt.evaluation.breakdown`
(``ngram_precision_gaps``, ``bleu_by_length``). Writes ``PREFIX.md`` (system − baseline
precision for n = 1..4, then BLEU of both systems per source-length bucket) and
``PREFIX.png`` (the two figures side by side). Buckets default to the six sets of Figure 7:
(0,10], [11,20], ..., [51,∞) source words: words of ``--source-lang``'s tokeniser (jieba for
zh, janome for ja, Moses otherwise) for raw sources, whitespace tokens without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from localnmt.analysis.gmm_record import write_markdown
from localnmt.errors import entry_point
from localnmt.evaluation.breakdown import (
    bleu_by_length,
    ngram_precision_gaps,
    parse_edges,
    source_length,
)
from localnmt.evaluation.scoring import read_lines


def _lines(path: str) -> list[str]:
    return read_lines(path)


@entry_point("gmm_ngram")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m localnmt.analysis.gmm_ngram", description=__doc__
    )
    parser.add_argument("--refs", required=True, help="references")
    parser.add_argument("--baseline", required=True, help="baseline hypotheses")
    parser.add_argument("--system", required=True, help="system hypotheses")
    parser.add_argument("--sources", required=True, help="source sentences (for the lengths)")
    parser.add_argument("--source-lang", help="segment raw sources with this language's "
                        "tokeniser (default: whitespace tokens of tokenised sources)")  # fmt: skip
    parser.add_argument("--edges", default="10,20,30,40,50", help="length bucket edges")
    parser.add_argument("--out", required=True, help="output prefix: writes PREFIX.md, .png")
    args = parser.parse_args(argv)

    refs, base, system = _lines(args.refs), _lines(args.baseline), _lines(args.system)
    sources = _lines(args.sources)
    if not len(refs) == len(base) == len(system) == len(sources):
        raise SystemExit("references, hypotheses and sources differ in line count")
    gaps = ngram_precision_gaps(base, system, refs)
    edges = parse_edges(args.edges)
    kw = {"length": source_length(args.source_lang)} if args.source_lang else {}
    base_buckets = bleu_by_length(sources, base, refs, edges, **kw)
    sys_buckets = bleu_by_length(sources, system, refs, edges, **kw)

    out = Path(args.out)
    rows: list[list[object]] = [[f"{n}-gram precision gap", "", "", gap] for n, gap in
                                enumerate(gaps, 1)]  # fmt: skip
    for b, s in zip(base_buckets, sys_buckets):
        bb = "-" if b.bleu is None else b.bleu
        sb = "-" if s.bleu is None else s.bleu
        gap = "-" if b.bleu is None or s.bleu is None else s.bleu - b.bleu
        rows.append([f"BLEU {b.label} ({b.sentences} sent.)", bb, sb, gap])
    write_markdown(out.with_suffix(".md"), ["", "baseline", "system", "system − baseline"], rows)

    from localnmt.plotting import pyplot

    plt = pyplot()

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3))
    ax1.bar([f"{n}-gram" for n in range(1, len(gaps) + 1)], gaps, color="tab:blue")
    ax1.axhline(0, color="black", linewidth=0.8)
    ax1.set_ylabel("precision gap (system − baseline)")
    labels = [b.label for b in base_buckets]
    xs = range(len(labels))
    ax2.plot(xs, [b.bleu or 0.0 for b in base_buckets], marker="o", label="baseline")
    ax2.plot(xs, [b.bleu or 0.0 for b in sys_buckets], marker="s", label="system")
    ax2.set_xticks(list(xs), labels, rotation=30)
    ax2.set_ylabel("BLEU")
    ax2.set_xlabel("source length")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    plt.close(fig)
    print(out.with_suffix(".md").read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
