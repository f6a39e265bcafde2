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
command prints how many sentences and tokens it used. The Jacobian is never held whole: its
rows come in chunks of batched vector–Jacobian products (``torch.func``), within
``--memory-mb`` per chunk (``--method reference``: the first, all-at-once implementation).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from localnmt.analysis.conllu import RelationSets, read_bpe, read_conllu, relation_sets
from localnmt.analysis.locality_bias import encode, load_model

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


#: Default memory budget of one chunk of vector–Jacobian products (MiB).
MEMORY_MB = 512


def jacobian_norms(
    attention: Any, x: Tensor, method: str = "chunked", memory_mb: int = MEMORY_MB
) -> Tensor:
    """``β (T, T)``: Frobenius norm of ``∂Y[i]/∂X[j]`` for self-attention ``attention``.

    ``method="chunked"`` (default): one forward, then the ``T·C`` vector–Jacobian products
    (one per output coordinate ``Y[i, c]``) batched with ``torch.func.vmap`` in chunks sized to
    ``memory_mb``; each chunk's rows ``∂Y[i, c]/∂X`` are squared and summed into ``β²[i, :]``
    at once, so memory is bounded whatever ``T``. ``method="reference"``: the full Jacobian
    at once (``torch.autograd.functional.jacobian``), ``T²·C²`` floats."""
    if method == "reference":
        return _jacobian_norms_reference(attention, x)
    if method != "chunked":
        raise ValueError(f"method={method!r}: use 'chunked' or 'reference'")
    t, dim = x.size(0), x.size(-1)

    def f(inp: Tensor) -> Tensor:
        # need_weights: the dense reference path, whose every backward op has a vmap rule
        return attention(inp, inp, inp, need_weights=True)[0]

    _, vjp_fn = torch.func.vjp(f, x)
    rows = t * dim
    chunk = max(1, min(rows, memory_mb * 2**20 // _bytes_per_product(attention, t, dim)))
    beta2 = x.new_zeros(t, t)
    for start in range(0, rows, chunk):
        index = torch.arange(start, min(start + chunk, rows), device=x.device)
        cotangents = torch.zeros(index.numel(), rows, dtype=x.dtype, device=x.device)
        cotangents[torch.arange(index.numel()), index] = 1.0  # e_(i, c), i = index // C
        (grads,) = torch.func.vmap(vjp_fn)(cotangents.view(-1, *x.shape))  # (n, T, 1, C)
        beta2.index_add_(0, index // dim, grads.pow(2).sum(dim=-1).view(-1, t))
    return beta2.sqrt()


def _bytes_per_product(attention: Any, t: int, dim: int) -> int:
    """Rough float32 memory of one batched vector–Jacobian product: a few ``(H, T, T)``
    attention-sized and ``(T, C)`` activation-sized tensors."""
    heads = int(getattr(attention, "num_heads", 1))
    return 4 * (8 * heads * t * t + 12 * t * dim)


def _jacobian_norms_reference(attention: Any, x: Tensor) -> Tensor:
    """The first implementation: the whole Jacobian ``(T, 1, C, T, 1, C)`` at once."""

    def f(inp: Tensor) -> Tensor:
        return attention(inp, inp, inp, need_weights=False)[0]

    jac = torch.autograd.functional.jacobian(f, x, vectorize=True)  # (T, 1, C, T, 1, C)
    t = x.size(0)
    return jac.reshape(t, -1, t, x.size(-1)).pow(2).sum(dim=(1, 3)).sqrt()


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


@dataclass
class Coverage:
    """What an analysis used: sentences (of how many in the file) and source tokens."""

    sentences: int = 0
    in_file: int = 0
    words: int = 0
    pieces: int = 0  # word pieces, end-of-sentence included

    def __str__(self) -> str:
        return (
            f"{self.sentences} of {self.in_file} sentences, {self.words} words, "
            f"{self.pieces} tokens (word pieces incl. </s>)"
        )


def sensitivity(
    model: Any,
    task: Any,
    conllu: str,
    bpe: str | None = None,
    limit: int = 0,
    method: str = "chunked",
    memory_mb: int = MEMORY_MB,
    coverage: Coverage | None = None,
) -> list[list[dict[str, float]]]:
    """Per sentence, per layer: ``{'local': γ, 'syntactic': γ, 'unrelated': γ}``; every
    sentence of ``conllu`` unless ``limit`` > 0. ``coverage``, if given, is filled in."""
    every = read_conllu(conllu)
    sentences = every[: limit or None]
    coverage = coverage if coverage is not None else Coverage()
    coverage.in_file = len(every)
    results = []
    for sentence, line in zip(sentences, read_bpe(bpe, len(sentences)), strict=True):
        tokens, spans = encode(task, sentence.words, line)
        sets = relation_sets(sentence, spans, tokens.numel())
        inputs = layer_inputs(model, tokens)
        results.append(
            [
                gammas(jacobian_norms(layer.self_attn, x, method, memory_mb), sets)
                for layer, x in zip(model.encoder.layers, inputs, strict=True)
            ]
        )
        coverage.sentences += 1
        coverage.words += len(sentence.words)
        coverage.pieces += tokens.numel()
    return results


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
        choices=("chunked", "reference"),
        default="chunked",
        help="chunked vector-Jacobian products (bounded memory) or the whole Jacobian at once",
    )
    parser.add_argument(
        "--memory-mb", type=int, default=MEMORY_MB, help="memory budget of one chunk (MiB)"
    )
    parser.add_argument("--out", default="analysis", help="output folder")
    args = parser.parse_args(argv)
    if args.max_sentences < 0 or args.memory_mb < 1:
        parser.error("--max-sentences must be >= 0 and --memory-mb >= 1")
    model, task = load_model(args.path, args.data)
    coverage = Coverage()
    results = sensitivity(
        model, task, args.conllu, args.bpe, args.max_sentences, args.method, args.memory_mb,
        coverage,
    )  # fmt: skip
    print(f"sensitivity over {coverage}")
    print(write_outputs(results, Path(args.out)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
