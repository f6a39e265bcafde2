"""Sensitivity analysis (Pande et al. 2021 §3.1, eq. 5–7; Figure 1).

Per encoder layer, ``β[i, j] = ‖∂Y[i]/∂X[j]‖_F`` where X is the input of the multi-head
self-attention and Y its output (eq. 2, after Wo, before the residual). Then

    γ_local     = avg_i avg_{j∈L_i} β[i, j]       (5)
    γ_syntactic = avg_i avg_{j∈S_i} β[i, j]       (6)
    γ_unrelated = avg_i avg_{j∈U_i} β[i, j]       (7)

over the queries i (word pieces) whose set is non-empty (sets: :mod:`localnmt.analysis.conllu`).
The Jacobian is taken with the layer's real input X of each sentence (captured by a hook),
model in eval mode. Writes ``sensitivity.tsv`` (per sentence and layer) and
``sensitivity.png`` (per layer, the distribution of the three γ over sentences).

    python -m localnmt.analysis.sensitivity --path ckpt.pt --data data-bin \\
        --conllu test.conllu [--bpe test.bpe.en] --out analysis/

Every sentence of the CoNLL-U file by default (``--max-sentences N``: the first N); the
command prints how many sentences and tokens it used. The Jacobian is never held whole.

``--method structured`` (default) uses the closed form of
:mod:`localnmt.analysis.jacobian_structured` (plain attention, ``local_heads``,
``local_heads_renorm``, ``tied_qk`` in eval mode; any other layer falls back to ``chunked``,
logged); ``--method chunked`` batched vector–Jacobian products and ``--method reference`` the
whole Jacobian at once (:mod:`localnmt.analysis.jacobian_norms`). The three give the same
numbers to float32 precision. ``python -m bench.sensitivity_timing`` times the three side by
side and prints the process's peak memory.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from localnmt.analysis.conllu import RelationSets
from localnmt.analysis.jacobian_norms import MEMORY_MB, METHODS, jacobian_norms
from localnmt.analysis.jacobian_structured import structured_unsupported
from localnmt.analysis.locality_bias import Coverage, Treebank, load_model
from localnmt.errors import DataError, UsageError, entry_point

__all__ = [
    "KINDS",
    "MEMORY_MB",
    "METHODS",
    "gammas",
    "jacobian_norms",
    "layer_inputs",
    "main",
    "sensitivity",
    "structured_unsupported",
    "write_outputs",
]

logger = logging.getLogger(__name__)

KINDS = ("local", "syntactic", "unrelated")


def layer_inputs(model: Any, tokens: Tensor) -> list[Tensor]:
    """The ``(T, 1, C)`` input of every encoder self-attention for one sentence."""
    captured: list[Tensor] = []

    def hook(_module, args, kwargs):
        captured.append((kwargs.get("query") if "query" in kwargs else args[0]).detach())

    handles = [
        layer.self_attn.register_forward_pre_hook(hook, with_kwargs=True)
        for layer in model.encoder.layers
    ]
    try:
        with torch.no_grad():
            model.encoder(tokens[None], torch.tensor([tokens.numel()]))
    finally:
        for handle in handles:
            handle.remove()
    return captured


def gammas(beta: Tensor, sets: RelationSets) -> dict[str, float]:
    """Eq. 5–7 for one sentence and layer (NaN when no query has the set)."""
    out = {}
    for kind in KINDS:
        subset = getattr(sets, kind)
        valid = sets.queries & subset.any(-1)
        if not valid.any():
            out[kind] = float("nan")
            continue
        per_query = (beta * subset).sum(-1) / subset.sum(-1).clamp(min=1)
        out[kind] = float(per_query[valid].mean())
    return out


def sensitivity(
    model: Any,
    task: Any,
    conllu: str,
    bpe: str | None = None,
    limit: int = 0,
    method: str = "structured",
    memory_mb: int = MEMORY_MB,
) -> tuple[list[list[dict[str, float]]], Coverage]:
    """Per sentence, per layer: ``{'local': γ, 'syntactic': γ, 'unrelated': γ}``; every
    sentence of ``conllu`` unless ``limit`` > 0; and the :class:`Coverage` of the results
    (counted as the locality-bias analysis counts: end-of-sentence token excluded)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if method == "structured":
        for number, layer in enumerate(model.encoder.layers, 1):
            reason = structured_unsupported(layer.self_attn)
            if reason is not None:
                logger.info(
                    "layer %d: structured Jacobian not applicable (%s): chunked", number, reason
                )
    treebank = Treebank(conllu, bpe, limit)
    results = []
    for tokens, sets in treebank.encoded(task):
        inputs = layer_inputs(model, tokens)
        results.append(
            [
                gammas(jacobian_norms(layer.self_attn, x, method, memory_mb), sets)
                for layer, x in zip(model.encoder.layers, inputs, strict=True)
            ]
        )
    return results, treebank.coverage()


def write_outputs(results: list[list[dict[str, float]]], out: Path) -> str:
    from localnmt.plotting import pyplot

    plt = pyplot()

    out.mkdir(parents=True, exist_ok=True)
    rows = ["sentence\tlayer\t" + "\t".join(f"gamma_{k}" for k in KINDS)]
    for s, layers in enumerate(results):
        for layer, g in enumerate(layers):
            rows.append(f"{s + 1}\t{layer + 1}\t" + "\t".join(f"{g[k]:.6g}" for k in KINDS))
    (out / "sensitivity.tsv").write_text("\n".join(rows) + "\n")

    num_layers = len(results[0]) if results else 0
    values = torch.tensor([[[g[k] for k in KINDS] for g in layers] for layers in results])
    summary = ["layer\t" + "\t".join(f"mean_gamma_{k}" for k in KINDS)]
    fig, ax = plt.subplots(figsize=(max(4, num_layers * 1.2), 3))
    colors = ("tab:blue", "tab:orange", "tab:green")
    for layer in range(num_layers):
        means = values[:, layer].nanmean(0)
        summary.append(f"{layer + 1}\t" + "\t".join(f"{m:.6g}" for m in means.tolist()))
        for k, color in enumerate(colors):
            data = values[:, layer, k]
            data = data[~data.isnan()].numpy()
            if data.size:
                box = ax.boxplot(data, positions=[layer * 4 + k], widths=0.8, patch_artist=True)
                box["boxes"][0].set_facecolor(color)
    ax.set_xticks([layer * 4 + 1 for layer in range(num_layers)])
    ax.set_xticklabels([str(layer + 1) for layer in range(num_layers)])
    ax.set_xlabel("layer (blue local, orange syntactic, green unrelated)")
    ax.set_ylabel("γ (gradient norm)")
    fig.tight_layout()
    fig.savefig(out / "sensitivity.png", dpi=120)
    plt.close(fig)
    return "\n".join(summary) + "\n"


@entry_point("sensitivity")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localnmt.analysis.sensitivity")
    parser.add_argument("--path", required=True, help="checkpoint of a translation model")
    parser.add_argument("--data", required=True, help="fairseq data-bin (dictionaries)")
    parser.add_argument("--conllu", required=True, help="dependency-parsed source sentences")
    parser.add_argument("--bpe", help="the same sentences after BPE ('@@ ' marker), one a line")
    parser.add_argument(
        "--max-sentences", type=int, default=0, help="first N sentences only (default: all)"
    )
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="structured",
        help="structured: closed-form Jacobian blocks (plain attention, local_heads, "
        "local_heads_renorm, tied_qk; other layers fall back to chunked, said in the log); "
        "chunked: batched vector-Jacobian products; reference: the whole Jacobian at once "
        "(T²·C² floats). All three give the same numbers",
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=MEMORY_MB,
        help="target size of one chunk (MiB): of query rows (structured) or of VJPs "
        "(chunked, from a rough estimate)",
    )
    parser.add_argument("--out", default="analysis", help="output folder")
    args = parser.parse_args(argv)
    if args.max_sentences < 0 or args.memory_mb < 1:
        raise UsageError("--max-sentences must be >= 0 and --memory-mb >= 1")
    model, task = load_model(args.path, args.data)
    try:
        results, coverage = sensitivity(
            model, task, args.conllu, args.bpe, args.max_sentences, args.method, args.memory_mb
        )
    except ValueError as err:
        raise DataError(str(err)) from None
    print(f"sensitivity: {coverage.describe(args.conllu)}")
    print(write_outputs(results, Path(args.out)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
