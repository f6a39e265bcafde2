"""Gating factor g_i per decoder layer (Zhang & Feng 2021, Figure 5).

``python -m localnmt.analysis.gmm_gate --path CKPT [--data DIR] [--subset test |
--source S --target T] --out PREFIX`` force-decodes the references, collects the gate of
eq. 14 (weight of the Gaussian mixture in eq. 13) of every head and real target token, and
writes ``PREFIX.md`` (per layer: count, mean, std, 10/50/90 % quantiles, histogram) and
``PREFIX.png`` (one histogram per layer, as Figure 5).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import Tensor

from localnmt.analysis.gmm_record import (
    SentenceRecord,
    add_common_args,
    records_from_args,
    write_markdown,
)
from localnmt.attention.methods.gmm import GaussianMixtureRecord
from localnmt.errors import entry_point

BINS = 10


def gate_values(records: Iterable[SentenceRecord]) -> dict[int, Tensor]:
    """All gate values per decoder layer (1-based), flattened over heads and target tokens."""
    values: dict[int, list[Tensor]] = {}
    for rec in records:
        for layer, record in rec.layers.items():
            gmm = record.get(GaussianMixtureRecord)
            if gmm is not None:
                values.setdefault(layer + 1, []).append(gmm.gate.flatten())
    return {layer: torch.cat(v) for layer, v in sorted(values.items())}


def histogram(values: Tensor, bins: int = BINS) -> list[float]:
    """Fraction of values in each of ``bins`` equal bins of [0, 1]."""
    counts = torch.histc(values.float(), bins=bins, min=0.0, max=1.0)
    return (counts / counts.sum().clamp(min=1)).tolist()


def summary_rows(values: dict[int, Tensor]) -> list[list[object]]:
    rows: list[list[object]] = []
    for layer, v in values.items():
        q = torch.quantile(v.float(), torch.tensor([0.1, 0.5, 0.9])).tolist()
        hist = " ".join(f"{h:.2f}" for h in histogram(v))
        rows.append(
            [
                f"L{layer}",
                v.numel(),
                v.mean().item(),
                v.std().item() if v.numel() > 1 else 0.0,
                q[0],
                q[1],
                q[2],
                hist,
            ]  # fmt: skip
        )
    return rows


def plot(values: dict[int, Tensor], path: Path) -> None:
    from localnmt.plotting import pyplot

    plt = pyplot()

    n = max(len(values), 1)
    fig, axes = plt.subplots(1, n, figsize=(2.6 * n, 2.4), squeeze=False, sharey=True)
    for ax, (layer, v) in zip(axes[0], values.items()):
        ax.hist(v.float().numpy(), bins=20, range=(0, 1), density=True, color="tab:blue")
        ax.set_title(f"L{layer}")
        ax.set_xlabel("g")
    axes[0][0].set_ylabel("density")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@entry_point("gmm_gate")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m localnmt.analysis.gmm_gate", description=__doc__
    )
    add_common_args(parser)
    args = parser.parse_args(argv)
    values = gate_values(records_from_args(args))
    if not values:
        raise SystemExit("no gmm gate recorded: the model has no gmm[fusion=gate] cross-attention")
    out = Path(args.out)
    header = ["layer", "values", "mean", "std", "q10", "q50", "q90", f"histogram ({BINS} bins)"]
    write_markdown(out.with_suffix(".md"), header, summary_rows(values))
    plot(values, out.with_suffix(".png"))
    print(out.with_suffix(".md").read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
