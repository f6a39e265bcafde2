"""How often the σ floor of GMM cross-attention binds (option ``sigma_min`` of ``gmm``).

``python -m localnmt.analysis.gmm_sigma --path CKPT [--data DIR] [--subset valid | --source S
--target T] --out PREFIX`` force-decodes the references and counts, per decoder layer and per
source length, the mixture components (real target token × head × component) whose σ sits at
the floor, i.e. where eq. 12 (``approx``: min(J/6·sigmoid(σ̂), μ/3, (J−μ)/3)) or
``J·sigmoid(σ̂)`` (``norm``) fell below ``sigma_min``. A floored component is put down to the
start of the sentence when μ < 3·sigma_min (the μ/3 term of eq. 12), to its end (the last
source token is EOS) when J − μ < 3·sigma_min (the (J−μ)/3 term; J = real source tokens with
EOS), else to a narrow predicted width. The last column is the share of the mixture weight ω
on floored components. ``--init-seed N`` counts for a freshly initialised
model of the checkpoint's architecture instead (torch seed N), for comparison. Writes
``PREFIX.md``; docs/design.md reports a run.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from localnmt.analysis.gmm_record import SentenceRecord, add_common_args, write_markdown
from localnmt.attention.methods.gmm import GaussianMixtureRecord
from localnmt.errors import entry_point

#: Relative tolerance of "σ at the floor" (the floor is a clamp: floored σ equal it exactly).
TOLERANCE = 1e-6


@dataclass
class FloorCount:
    """Running counts of one group (a layer or a source-length bucket)."""

    components: int = 0
    floored: int = 0
    at_start: int = 0
    at_end: int = 0
    weight: float = 0.0  # Σ ω of floored components
    total_weight: float = 0.0  # Σ ω of all components

    def add(self, gmm: GaussianMixtureRecord, length: int, sigma_min: float) -> None:
        floored = gmm.sigma <= sigma_min * (1 + TOLERANCE)
        reach = 3 * sigma_min
        start = floored & (gmm.mu < reach)
        end = floored & ~start & (length - gmm.mu < reach)
        omega = gmm.omega.float()
        self.components += floored.numel()
        self.floored += int(floored.sum())
        self.at_start += int(start.sum())
        self.at_end += int(end.sum())
        self.weight += float(omega[floored].sum())
        self.total_weight += float(omega.sum())

    def row(self, label: str) -> list[object]:
        n = max(self.components, 1)
        return [
            label,
            self.components,
            100.0 * self.floored / n,
            100.0 * self.at_start / n,
            100.0 * self.at_end / n,
            100.0 * (self.floored - self.at_start - self.at_end) / n,
            100.0 * self.weight / max(self.total_weight, 1e-30),
        ]


HEADER = ["", "components", "floored %", "at start %", "at end %", "narrow %", "ω on floored %"]


@dataclass
class FloorTable:
    """Counts per decoder layer (1-based) and per source-length bucket (all layers)."""

    layers: dict[int, FloorCount]
    buckets: dict[str, FloorCount]
    total: FloorCount

    def rows(self) -> list[list[object]]:
        rows = [self.total.row("all")]
        rows += [count.row(f"L{layer}") for layer, count in sorted(self.layers.items())]
        rows += [count.row(f"J−1 in {label}") for label, count in self.buckets.items()]
        return rows


def floor_counts(
    records: Iterable[SentenceRecord], sigma_min: float, edges: Sequence[int] = (10, 20)
) -> FloorTable:
    """Count floored components over ``records`` (layers without ``gmm`` are skipped);
    buckets are by source length without EOS, as in the entropy table."""
    from localnmt.evaluation.breakdown import bucket_bounds

    bounds = bucket_bounds(edges)
    table = FloorTable({}, {label: FloorCount() for _, _, label in bounds}, FloorCount())
    for rec in records:
        length = int(rec.source.numel())  # J: real source keys, EOS included
        label = _bucket(rec.source_length, bounds)
        for layer, record in rec.layers.items():
            gmm = record.get(GaussianMixtureRecord)
            if gmm is None:
                continue
            for count in (table.layers.setdefault(layer + 1, FloorCount()),
                          table.buckets[label], table.total):  # fmt: skip
                count.add(gmm, length, sigma_min)
    return table


def _bucket(length: int, bounds: list[tuple[int, int | None, str]]) -> str:
    for low, high, label in bounds:
        if low <= length and (high is None or length <= high):
            return label
    return bounds[0][2]  # length 0: the shortest bucket


def model_sigma_floor(model: nn.Module) -> tuple[float, str]:
    """``(sigma_min, variant)`` of the model's gmm cross-attention (the first found)."""
    from localnmt.analysis.gmm_record import cross_attentions

    for attention in cross_attentions(model):
        for modifier in attention.modifiers:
            if modifier.name == "gmm":
                return float(modifier.options.sigma_min), str(modifier.options.variant)
    raise SystemExit("the model has no gmm cross-attention: no σ floor to count")


def load_fresh_model(
    path: str | Path, data: str | Path | None, seed: int
) -> tuple[nn.Module, object]:
    """A model of the checkpoint's architecture with freshly initialised parameters (torch
    seed ``seed``), in eval mode, and its task."""
    from fairseq import checkpoint_utils

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    overrides = {"data": str(data)} if data is not None else {}
    _models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(path)], arg_overrides=overrides
    )
    torch.manual_seed(seed)
    return task.build_model(cfg.model).eval(), task


@entry_point("gmm_sigma")
def main(argv: list[str] | None = None) -> int:
    from localnmt.analysis.gmm_record import force_decode, load_model, load_pairs

    parser = argparse.ArgumentParser(
        prog="python -m localnmt.analysis.gmm_sigma", description=__doc__
    )
    add_common_args(parser)
    parser.add_argument("--edges", default="10,20", help="source length bucket edges")
    parser.add_argument(
        "--init-seed", type=int, help="count for a freshly initialised model (this torch seed)"
    )
    args = parser.parse_args(argv)
    from localnmt.evaluation.breakdown import parse_edges

    if args.init_seed is None:
        model, task = load_model(args.path, args.data)
    else:
        model, task = load_fresh_model(args.path, args.data, args.init_seed)
    sigma_min, variant = model_sigma_floor(model)
    if variant == "synthesis":
        raise SystemExit("gmm[variant=synthesis] has no σ floor (σ = sqrt(exp(−σ̂)/2))")
    pairs = load_pairs(
        task, subset=args.subset, source=args.source, target=args.target, limit=args.limit
    )
    d = task.target_dictionary
    records = force_decode(model, pairs, pad=d.pad(), eos=d.eos(), batch_size=args.batch_size)
    table = floor_counts(records, sigma_min, parse_edges(args.edges))
    out = Path(args.out).with_suffix(".md")
    write_markdown(out, [f"σ = {sigma_min:g} ({variant})", *HEADER[1:]], table.rows())
    print(out.read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
