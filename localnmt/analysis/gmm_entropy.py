"""Entropy of cross-attention by source length (Zhang & Feng 2021, Table 6).

``python -m localnmt.analysis.gmm_entropy --path CKPT ... --out PREFIX`` force-decodes the
references and reports the mean entropy (nats) of the Gaussian mixture (GMA, β of eq. 6), the
dot-product (DP, α of eq. 2) and the fused (Total, γ of eq. 13) attention, overall and for
source lengths (0,20], [21,40], [41,∞) (source tokens without EOS). The mean is over every
real target token, head and cross-attention layer with the ``gmm`` modifier; a model without
it (the baseline) gets only the Total row, over all its layers. β is not normalised in the
approximate variant: its entropy is that of β divided by its sum over the source.
Writes ``PREFIX.md`` and ``PREFIX.png``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from torch import Tensor

from localnmt.analysis.gmm_record import (
    SentenceRecord,
    add_common_args,
    records_from_args,
    write_markdown,
)
from localnmt.attention.methods.gmm import GaussianMixtureRecord
from localnmt.attention.record import AttentionRecord
from localnmt.errors import entry_point
from localnmt.evaluation.breakdown import bucket_bounds


def _gmm_field(name: str) -> Callable[[AttentionRecord], Tensor | None]:
    def read(record: AttentionRecord) -> Tensor | None:
        gmm = record.get(GaussianMixtureRecord)
        return None if gmm is None else getattr(gmm, name)

    return read


#: Table rows and the recorded distribution each reads (None: not in this layer).
KINDS: dict[str, Callable[[AttentionRecord], Tensor | None]] = {
    "GMA": _gmm_field("beta"),
    "DP": _gmm_field("alpha"),
    "Total": lambda record: record.probs,
}


def entropy(dist: Tensor, eps: float = 1e-12) -> Tensor:
    """Entropy of each row of ``dist`` (normalised first), in nats."""
    p = dist.float().clamp(min=0)
    p = p / p.sum(-1, keepdim=True).clamp(min=eps)
    return -(p * (p + eps).log()).sum(-1)


class EntropyTable:
    """Running sums of entropies per kind and length bucket."""

    def __init__(self, edges: Sequence[int] = (20, 40)):
        self.buckets = bucket_bounds(edges)
        self.sums: dict[tuple[str, str], float] = {}
        self.counts: dict[tuple[str, str], int] = {}

    def bucket(self, length: int) -> str:
        for low, high, label in self.buckets:
            if low <= length and (high is None or length <= high):
                return label
        return self.buckets[0][2]  # length 0: the shortest bucket

    def add(self, rec: SentenceRecord) -> None:
        has_gmm = any(r.get(GaussianMixtureRecord) for r in rec.layers.values())
        for record in rec.layers.values():
            if has_gmm and record.get(GaussianMixtureRecord) is None:
                continue
            for kind, read in KINDS.items():
                dist = read(record)
                if dist is None:
                    continue
                values = entropy(dist).flatten()
                for label in ("All", self.bucket(rec.source_length)):
                    key = (kind, label)
                    self.sums[key] = self.sums.get(key, 0.0) + values.sum().item()
                    self.counts[key] = self.counts.get(key, 0) + values.numel()

    def labels(self) -> list[str]:
        return ["All", *(label for _, _, label in self.buckets)]

    def rows(self) -> list[list[object]]:
        rows: list[list[object]] = []
        for kind in KINDS:
            if not any(k == kind for k, _ in self.counts):
                continue
            row: list[object] = [kind]
            for label in self.labels():
                n = self.counts.get((kind, label), 0)
                row.append(self.sums[(kind, label)] / n if n else "-")
            rows.append(row)
        return rows


def compute(records: Iterable[SentenceRecord], edges: Sequence[int] = (20, 40)) -> EntropyTable:
    table = EntropyTable(edges)
    for rec in records:
        table.add(rec)
    return table


def plot(table: EntropyTable, path: Path) -> None:
    from localnmt.plotting import pyplot

    plt = pyplot()

    labels = table.labels()
    rows = table.rows()
    fig, ax = plt.subplots(figsize=(5.5, 3))
    width = 0.8 / max(len(rows), 1)
    for i, row in enumerate(rows):
        heights = [v if isinstance(v, float) else 0.0 for v in row[1:]]
        ax.bar([x + i * width for x in range(len(labels))], heights, width, label=row[0])
    ax.set_xticks([x + width * (len(rows) - 1) / 2 for x in range(len(labels))], labels)
    ax.set_ylabel("entropy (nats)")
    ax.set_xlabel("source length")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@entry_point("gmm_entropy")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m localnmt.analysis.gmm_entropy", description=__doc__
    )
    add_common_args(parser)
    parser.add_argument("--edges", default="20,40", help="length bucket edges")
    args = parser.parse_args(argv)
    from localnmt.evaluation.breakdown import parse_edges

    table = compute(records_from_args(args), parse_edges(args.edges))
    out = Path(args.out)
    write_markdown(out.with_suffix(".md"), ["", *table.labels()], table.rows())
    plot(table, out.with_suffix(".png"))
    print(out.with_suffix(".md").read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
