"""Force-decode references through a trained model and keep each cross-attention's record.

Shared by the Zhang & Feng (2021) analyses (gate, entropy, alignment, σ floor). Every
cross-attention :class:`~localnmt.attention.pipeline.LocalAttention` runs with
``recording = True``; its ``last_record`` (an :class:`~localnmt.attention.record.AttentionRecord`)
holds ``probs`` (the attention used, γ) and, with the ``gmm`` modifier, a
:class:`~localnmt.attention.methods.gmm.GaussianMixtureRecord` (α, β, gate, μ, σ, ω).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from localnmt.attention.pipeline import LocalAttention
from localnmt.attention.record import AttentionRecord
from localnmt.evaluation.scoring import read_lines


@dataclass
class SentenceRecord:
    """One sentence pair: source/target token ids (with EOS) and, per decoder layer (0-based),
    its cross-attention record cut to the sentence's real tokens: ``(H, T_tgt, J)`` for
    distributions, ``(H, T_tgt)`` for the gate, ``(H, T_tgt, K)`` for μ / σ / ω."""

    index: int
    source: Tensor
    target: Tensor
    layers: dict[int, AttentionRecord]

    @property
    def source_length(self) -> int:
        """Real source tokens, EOS excluded."""
        return int(self.source.numel()) - 1


def load_model(path: str | Path, data: str | Path | None = None) -> tuple[nn.Module, object]:
    """The first model of a checkpoint (eval mode, CPU) and its task."""
    from fairseq import checkpoint_utils

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    overrides = {"data": str(data)} if data is not None else {}
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(path)], arg_overrides=overrides
    )
    return models[0].eval(), task


def cross_attentions(model: nn.Module) -> list[LocalAttention]:
    """The decoder's cross-attention modules, in layer order."""
    found = [
        m
        for m in model.decoder.modules()
        if isinstance(m, LocalAttention) and m.site.kind == "cross"
    ]
    return sorted(found, key=lambda m: m.site.layer)


def load_pairs(
    task: object,
    *,
    subset: str | None = None,
    source: str | Path | None = None,
    target: str | Path | None = None,
    limit: int | None = None,
) -> list[tuple[Tensor, Tensor]]:
    """Token ids of sentence pairs: from text files (tokenised/BPE'd as the model's data) or
    from a binarised ``subset`` of the task's data directory. Both end with EOS."""
    pairs: list[tuple[Tensor, Tensor]] = []
    if source is not None and target is not None:
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        src_lines = read_lines(source)
        tgt_lines = read_lines(target)
        if len(src_lines) != len(tgt_lines):
            raise SystemExit(f"{source} and {target} differ in line count")
        for s, t in zip(src_lines, tgt_lines):
            pairs.append(
                (
                    src_dict.encode_line(s, add_if_not_exist=False, append_eos=True).long(),
                    tgt_dict.encode_line(t, add_if_not_exist=False, append_eos=True).long(),
                )
            )
    else:
        subset = subset or "test"
        task.load_dataset(subset)
        dataset = task.dataset(subset)
        for i in range(len(dataset)):
            item = dataset[i]
            pairs.append((item["source"].long(), item["target"].long()))
    return pairs[:limit] if limit is not None else pairs


@torch.no_grad()
def force_decode(
    model: nn.Module,
    pairs: Sequence[tuple[Tensor, Tensor]],
    *,
    pad: int,
    eos: int,
    batch_size: int = 32,
) -> Iterator[SentenceRecord]:
    """Teacher-forced decoding of each reference (left-padded source, as fairseq's default),
    yielding one record per pair in input order."""
    attentions = cross_attentions(model)
    for attention in attentions:
        attention.recording = True
    try:
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start : start + batch_size]
            src_len = max(s.numel() for s, _ in batch)
            tgt_len = max(t.numel() for _, t in batch)
            src = torch.full((len(batch), src_len), pad, dtype=torch.long)
            prev = torch.full((len(batch), tgt_len), pad, dtype=torch.long)
            for b, (s, t) in enumerate(batch):
                src[b, src_len - s.numel() :] = s
                prev[b, 0] = eos
                prev[b, 1 : t.numel()] = t[:-1]
            lengths = torch.tensor([s.numel() for s, _ in batch])
            model(src, lengths, prev)
            records = [a.last_record for a in attentions]
            for b, (s, t) in enumerate(batch):
                real = src[b] != pad
                layers = {
                    a.site.layer: rec.select(b, slice(0, t.numel()), real)
                    for a, rec in zip(attentions, records)
                    if rec is not None
                }
                yield SentenceRecord(start + b, s, t, layers)
    finally:
        for attention in attentions:
            attention.recording = False
            attention.last_record = None


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """``--path --data --subset | --source --target --limit --batch-size --out``."""
    parser.add_argument("--path", required=True, help="model checkpoint")
    parser.add_argument("--data", help="data-bin directory (dictionaries; default: training's)")
    parser.add_argument("--subset", default="test", help="binarised split to force-decode")
    parser.add_argument("--source", help="source text (same tokenisation/BPE as the model)")
    parser.add_argument("--target", help="reference text, line-aligned with --source")
    parser.add_argument("--limit", type=int, help="only the first N sentence pairs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", required=True, help="output prefix: writes PREFIX.md, .png")


def records_from_args(args: argparse.Namespace) -> Iterator[SentenceRecord]:
    model, task = load_model(args.path, args.data)
    pairs = load_pairs(
        task, subset=args.subset, source=args.source, target=args.target, limit=args.limit
    )
    d = task.target_dictionary
    return force_decode(model, pairs, pad=d.pad(), eos=d.eos(), batch_size=args.batch_size)


def write_markdown(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A markdown table (numbers with 4 significant decimals)."""

    def cell(value: object) -> str:
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
