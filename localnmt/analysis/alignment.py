"""Word alignment from cross-attention: AER, precision and recall (Zhang & Feng 2021, §6.4).

``python -m localnmt.analysis.alignment --path CKPT --source S --target T --gold G --out P``
force-decodes each reference, averages the cross-attention over the heads of one decoder
layer (the penultimate by default, ``--layer``), aligns each target subword to the source
subword of highest weight (source EOS and the final target EOS excluded), maps subwords to
words (``--bpe-marker``, subword-nmt's ``@@``), and scores the word links against a gold file
(one line per pair: ``i-j`` sure, ``ipj`` possible, source index first, 0-based unless
``--one-based``) with Och & Ney (2003)::

    precision = |A ∩ P| / |A|,  recall = |A ∩ S| / |S|,
    AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)        (P ⊇ S: sure links are possible)

Counts are summed over the corpus. Writes ``P.md`` (AER, P, R) and ``P.png`` (the attention
of the first pair with its arg-max links).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from torch import Tensor

from localnmt.attention.record import AttentionRecord
from localnmt.errors import entry_point
from localnmt.evaluation.scoring import read_lines
from localnmt.progress import track

Link = tuple[int, int]  # (source word, target word), 0-based


@dataclass
class GoldAlignment:
    sure: set[Link]
    possible: set[Link]  # includes the sure links


def parse_gold_line(line: str, one_based: bool = False) -> GoldAlignment:
    """``"0-0 1p2 2-1"`` → sure {(0,0), (2,1)}, possible {(0,0), (1,2), (2,1)}."""
    shift = 1 if one_based else 0
    sure: set[Link] = set()
    possible: set[Link] = set()
    for item in line.split():
        sep = "-" if "-" in item else "p" if "p" in item else None
        if sep is None:
            raise ValueError(f"bad alignment item '{item}' (expected i-j or ipj)")
        i, j = (int(x) - shift for x in item.split(sep))
        possible.add((i, j))
        if sep == "-":
            sure.add((i, j))
    return GoldAlignment(sure, possible)


def read_gold(path: str | Path, one_based: bool = False) -> list[GoldAlignment]:
    lines = read_lines(path)
    return [parse_gold_line(line, one_based) for line in lines]


def subword_to_word(tokens: Sequence[str], marker: str = "@@") -> list[int]:
    """Word index of each subword: a token ending with ``marker`` continues into the next."""
    index, out = 0, []
    for token in tokens:
        out.append(index)
        if not (marker and token.endswith(marker)):
            index += 1
    return out


def links_from_attention(
    attention: Tensor, src_words: Sequence[int], tgt_words: Sequence[int]
) -> set[Link]:
    """Word links from a ``(T_tgt, J)`` subword attention (rows/columns without EOS): each
    target subword links the word of its arg-max source subword."""
    best = attention.argmax(dim=-1).tolist()
    return {(src_words[j], tgt_words[t]) for t, j in enumerate(best)}


@dataclass
class AlignmentScore:
    aer: float
    precision: float
    recall: float
    hyp_links: int
    sure_links: int


def score(hyps: Iterable[set[Link]], golds: Iterable[GoldAlignment]) -> AlignmentScore:
    """Corpus AER / precision / recall (Och & Ney 2003), in percent."""
    a = s = a_s = a_p = 0
    for hyp, gold in zip(hyps, golds):
        possible = gold.possible | gold.sure
        a += len(hyp)
        s += len(gold.sure)
        a_s += len(hyp & gold.sure)
        a_p += len(hyp & possible)
    aer = 1.0 - (a_s + a_p) / (a + s) if a + s else 0.0
    return AlignmentScore(
        aer=100 * aer,
        precision=100 * a_p / a if a else 0.0,
        recall=100 * a_s / s if s else 0.0,
        hyp_links=a,
        sure_links=s,
    )


def layer_attention(layers: dict[int, AttentionRecord], layer: int) -> Tensor:
    """Head-averaged attention ``(T_tgt, J)`` of decoder layer ``layer`` (negative: from the
    top, −2 = penultimate)."""
    order = sorted(layers)
    return layers[order[layer]].probs.float().mean(dim=0)


def plot(attention: Tensor, path: Path) -> None:
    """Heat map of a ``(T_tgt, J)`` attention with each row's arg-max marked."""
    from localnmt.plotting import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(4, 4))
    ax.imshow(attention.numpy(), cmap="Greys", aspect="auto")
    best = attention.argmax(dim=-1)
    ax.scatter(best.numpy(), range(attention.size(0)), s=12, c="tab:red", label="arg-max")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_xlabel("source subword")
    ax.set_ylabel("target subword")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@entry_point("alignment")
def main(argv: list[str] | None = None) -> int:
    from localnmt.analysis.gmm_record import force_decode, load_model, load_pairs, write_markdown

    parser = argparse.ArgumentParser(
        prog="python -m localnmt.analysis.alignment", description=__doc__
    )
    parser.add_argument("--path", required=True, help="model checkpoint")
    parser.add_argument("--data", help="data-bin directory (dictionaries; default: training's)")
    parser.add_argument("--source", required=True, help="source text, BPE'd as the model's data")
    parser.add_argument("--target", required=True, help="reference text, BPE'd")
    parser.add_argument(
        "--gold", required=True, help="gold word alignments (i-j sure, ipj possible)"
    )
    parser.add_argument("--one-based", action="store_true", help="gold indices start at 1")
    parser.add_argument("--layer", type=int, default=-2, help="decoder layer (−2: penultimate)")
    parser.add_argument("--bpe-marker", default="@@", help="continuation marker ('' for none)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", required=True, help="output prefix: writes PREFIX.md, .png")
    args = parser.parse_args(argv)

    model, task = load_model(args.path, args.data)
    pairs = load_pairs(task, source=args.source, target=args.target)
    golds = read_gold(args.gold, args.one_based)
    if len(golds) != len(pairs):
        raise SystemExit(f"{args.gold} has {len(golds)} lines for {len(pairs)} sentence pairs")
    src_lines = read_lines(args.source)
    tgt_lines = read_lines(args.target)
    d = task.target_dictionary
    hyps: list[set[Link]] = []
    first: Tensor | None = None
    records = force_decode(model, pairs, pad=d.pad(), eos=d.eos(), batch_size=args.batch_size)
    for rec in track(records, len(pairs), "sentence pairs", "sent"):
        attention = layer_attention(rec.layers, args.layer)[:-1, :-1]  # drop EOS row/column
        src_words = subword_to_word(src_lines[rec.index].split(), args.bpe_marker)
        tgt_words = subword_to_word(tgt_lines[rec.index].split(), args.bpe_marker)
        hyps.append(links_from_attention(attention, src_words, tgt_words))
        if first is None:
            first = attention
    result = score(hyps, golds)
    out = Path(args.out)
    header = ["AER", "P.", "R.", "links", "sure links"]
    row = [result.aer, result.precision, result.recall, result.hyp_links, result.sure_links]
    write_markdown(out.with_suffix(".md"), header, [row])
    if first is not None:
        plot(first, out.with_suffix(".png"))
    print(out.with_suffix(".md").read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
