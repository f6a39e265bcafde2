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

``--method structured`` (default) uses its closed form. Per head h (``q̂_i = (W_q x_i + b_q)/√d``,
``k_j``, ``v_j`` likewise, ``p = softmax_k(q̂_i·k_k)`` after any fixed window, ``p′ = m ⊙ p``
with a fixed post-softmax mask ``m`` (local heads, eq. 9; ``m = 1`` otherwise),
``ō_i = Σ_k p′_ik v_k``, ``k̄_i = Σ_k p_ik k_k``, ``Y_i = Σ_h W_o^h ō_i^h + b_o``)::

    ∂Y_i/∂x_j = Σ_h W_o^h [ p′_ij W_v^h + (p′_ij v_j − p_ij ō_i) (W_k^hᵀ q̂_i)ᵀ
                            + δ_ij R_i^h W_q^h/√d ],    R_i = Σ_k p′_ik v_k k_kᵀ − ō_i k̄_iᵀ

Off the diagonal ``‖∂Y_i/∂x_j‖²`` is a sum of H×H Gram terms (no C×C matrix per pair:
O(T²·H²·C) per layer); the T diagonal blocks are formed whole. It applies to plain attention,
``local_heads``, ``local_heads_renorm`` and ``tied_qk`` in eval mode; any other layer falls
back to ``chunked`` (logged). ``--method chunked``: batched vector–Jacobian products
(``torch.func.vmap``), ``T·C`` of them, in chunks within ``--memory-mb``. ``--method
reference``: the first, all-at-once implementation (``T²·C²`` floats). The three give the same
numbers (tests); structured is ~100× faster at C = 512 (module tests; timing in the history).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from localnmt.analysis.conllu import RelationSets, read_bpe, read_conllu, relation_sets
from localnmt.analysis.locality_bias import encode, load_model
from localnmt.attention import LocalAttention
from localnmt.attention.methods.head_masks import LocalHeads, LocalHeadsRenorm
from localnmt.attention.methods.tied_qk import TiedQK

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


#: Default memory budget of one chunk of vector–Jacobian products (MiB).
MEMORY_MB = 512

#: Modifiers whose attention pattern is fixed: the closed form of ``method="structured"``.
_STRUCTURED_MODIFIERS = (LocalHeads, LocalHeadsRenorm, TiedQK)


METHODS = ("structured", "chunked", "reference")


def jacobian_norms(
    attention: Any, x: Tensor, method: str = "structured", memory_mb: int = MEMORY_MB
) -> Tensor:
    """``β (T, T)``: Frobenius norm of ``∂Y[i]/∂X[j]`` for self-attention ``attention``.

    ``method="structured"`` (default): the closed form of the module docstring, where
    :func:`structured_unsupported` finds none of its limits; elsewhere ``"chunked"``.
    ``method="chunked"``: one forward, then the ``T·C`` vector–Jacobian products (one per
    output coordinate ``Y[i, c]``) batched with ``torch.func.vmap`` in chunks sized to
    ``memory_mb``; each chunk's rows ``∂Y[i, c]/∂X`` are squared and summed into ``β²[i, :]``
    at once, so memory is bounded whatever ``T``. ``method="reference"``: the full Jacobian
    at once (``torch.autograd.functional.jacobian``), ``T²·C²`` floats."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if method == "reference":
        return _jacobian_norms_reference(attention, x)
    if method == "structured":
        reason = structured_unsupported(attention)
        if reason is None:
            return _jacobian_norms_structured(attention, x, memory_mb)
        logger.debug("structured Jacobian not applicable (%s): chunked", reason)
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


def structured_unsupported(attention: Any) -> str | None:
    """Why the closed form does not apply to ``attention`` (None: it applies). It needs a
    localnmt self-attention with fixed-pattern modifiers only (``local_heads``,
    ``local_heads_renorm``, ``tied_qk``), no bias_k / zero_attn, no active dropout."""
    if not isinstance(attention, LocalAttention) or not attention.self_attention:
        return "not a localnmt self-attention"
    others = [m.name for m in attention.modifiers if not isinstance(m, _STRUCTURED_MODIFIERS)]
    if others:
        return f"modifier {', '.join(others)}"
    if attention.bias_k is not None or attention.add_zero_attn:
        return "add_bias_kv / add_zero_attn"
    if attention._dropout_active() and attention.dropout_module.p > 0:
        return "dropout active (call model.eval())"
    if attention.q_proj.bias is None or attention.k_proj.bias is None:
        return "projections without bias"
    return None


def _probabilities(attention: Any, x: Tensor) -> tuple[Tensor, Tensor]:
    """``(p, p′)`` of the module's own forward, each ``(H, T, T)`` float32: the softmax (after
    any fixed window) and the probabilities after the post stage (``p′ = m ⊙ p``)."""
    recording, last = attention.recording, attention.last_record
    attention.recording = True
    try:
        with torch.no_grad():
            attention(x, x, x, need_weights=True)
        record = attention.last_record
    finally:
        attention.recording, attention.last_record = recording, last
    return record.probs_before_post[0], record.probs[0]


def _head_weights(attention: Any, proj: Any, heads: int, d: int) -> tuple[Tensor, Tensor]:
    """``(W (H, d, C), b (H, d))`` of a projection per head (tied groups broadcast)."""
    weight = proj.weight.view(-1, d, proj.in_features)
    bias = proj.bias.view(-1, d)
    if weight.size(0) != heads:  # tied_qk: G groups of heads share one projection
        tied = next(m for m in attention.modifiers if hasattr(m, "group_of_head"))
        index = tied.group_of_head.to(weight.device)
        weight, bias = weight.index_select(0, index), bias.index_select(0, index)
    return weight, bias


def _jacobian_norms_structured(attention: Any, x: Tensor, memory_mb: int) -> Tensor:
    """β from the closed form of ``∂Y_i/∂x_j`` (module docstring), query rows in chunks.

    Off the diagonal, with ``a_h = p′_ij``, ``u_h = W_o^h (p′_ij v_j − p_ij ō_i)``,
    ``w_h = W_k^hᵀ q̂_i`` and ``M_h = W_o^h W_v^h``: ``J = Σ_h a_h M_h + u_h w_hᵀ``, so
    ``‖J‖² = aᵀGa + 2 Σ_hg a_h u_gᵀ M_h w_g + Σ_hg (u_h·u_g)(w_h·w_g)`` (``G`` the Gram
    matrix of the ``M_h``). The ``T`` diagonal blocks add the query term and are formed
    whole (``C×C`` each)."""
    heads, d, dim, t = attention.num_heads, attention.head_dim, attention.embed_dim, x.size(0)
    f64 = torch.float64
    with torch.no_grad():
        p, pm = (z.to(f64) for z in _probabilities(attention, x))  # (H, T, T)
        xs = x[:, 0].to(f64)  # (T, C)
        wq, bq = (z.to(f64) for z in _head_weights(attention, attention.q_proj, heads, d))
        wk, bk = (z.to(f64) for z in _head_weights(attention, attention.k_proj, heads, d))
        wv, bv = (z.to(f64) for z in _head_weights(attention, attention.v_proj, heads, d))
        wo_full = attention.out_proj.weight.to(f64)  # (C, H·d)
        wo = wo_full.view(dim, heads, d).permute(1, 0, 2)  # (H, C, d)
        scaling = float(attention.scaling)
        q = scaling * (torch.einsum("hdc,tc->htd", wq, xs) + bq[:, None])  # q̂ (H, T, d)
        k = torch.einsum("hdc,tc->htd", wk, xs) + bk[:, None]
        v = torch.einsum("hdc,tc->htd", wv, xs) + bv[:, None]
        o = pm @ v  # ō_i = Σ_k p′_ik v_k
        kbar = p @ k  # k̄_i = Σ_k p_ik k_k
        vo = torch.einsum("hcd,htd->thc", wo, v)  # W_o^h v_j   (T, H, C)
        oo = torch.einsum("hcd,htd->thc", wo, o)  # W_o^h ō_i   (T, H, C)
        w = torch.einsum("hdc,htd->thc", wk, q)  # w_h = W_k^hᵀ q̂_i   (T, H, C)
        m = wo @ wv  # M_h   (H, C, C)
        gram = m.flatten(1) @ m.flatten(1).T  # ⟨M_h, M_g⟩   (H, H)
        vv = torch.einsum("jhc,jgc->jhg", vo, vo)
        oo_gram = torch.einsum("ihc,igc->ihg", oo, oo)
        ww = torch.einsum("ihc,igc->ihg", w, w)
        per_row = 8 * (2 * heads * heads * dim + 8 * t * heads * heads + 3 * dim * dim)
        chunk = max(1, min(t, memory_mb * 2**20 // per_row))
        beta2 = xs.new_zeros(t, t)
        for start in range(0, t, chunk):
            rows = slice(start, min(start + chunk, t))
            a = pm[:, rows].permute(1, 2, 0)  # a[i, j, h] = p′_ij^h
            b = p[:, rows].permute(1, 2, 0)  # p_ij^h
            z = torch.einsum("hce,ige->ihgc", m, w[rows])  # M_h w_g   (n, H, H, C)
            vz = torch.einsum("jgc,ihgc->ijhg", vo, z)
            oz = torch.einsum("igc,ihgc->ihg", oo[rows], z)
            vo_o = torch.einsum("jhc,igc->ijhg", vo, oo[rows])  # (W_o v_j)^h · (W_o ō_i)^g
            norm_a = torch.einsum("ijh,hg,ijg->ij", a, gram, a)
            cross = torch.einsum("ijh,ijg,ijhg->ij", a, a, vz) - torch.einsum(
                "ijh,ijg,ihg->ij", a, b, oz
            )
            norm_b = (
                torch.einsum("ijh,ijg,jhg,ihg->ij", a, a, vv, ww[rows])
                - 2 * torch.einsum("ijh,ijg,ijhg,ihg->ij", a, b, vo_o, ww[rows])
                + torch.einsum("ijh,ijg,ihg,ihg->ij", b, b, oo_gram[rows], ww[rows])
            )
            beta2[rows] = norm_a + 2 * cross + norm_b
            diag = torch.arange(rows.start, rows.stop, device=x.device)
            blocks = _diagonal_blocks(rows, p, pm, q, k, v, o, wq, wk, wv, wo_full, kbar, scaling)
            beta2[diag, diag] = blocks.pow(2).sum((1, 2))
        return beta2.clamp(min=0).sqrt().to(x.dtype)


def _diagonal_blocks(
    rows: slice,
    p: Tensor,
    pm: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    kbar: Tensor,
    scaling: float,
) -> Tensor:
    """``∂Y_i/∂x_i (n, C, C)`` for the queries ``rows``: ``W_o`` times the stacked per-head
    ``p′_ii W_v^h + (p′_ii v_i − p_ii ō_i) w_hᵀ + R_i^h W_q^h/√d`` (``R_i`` the query term)."""
    idx = torch.arange(rows.start, rows.stop, device=p.device)
    a = pm[:, idx, idx].T  # (n, H)
    b = p[:, idx, idx].T
    u = a[..., None] * v[:, idx].transpose(0, 1) - b[..., None] * o[:, idx].transpose(0, 1)
    w = torch.einsum("hdc,hnd->nhc", wk, q[:, idx])  # (n, H, C)
    # R_i = Σ_k p′_ik v_k k_kᵀ − ō_i k̄_iᵀ   (n, H, d, d)
    r = torch.einsum("hnk,hkd,hke->nhde", pm[:, idx], v, k) - torch.einsum(
        "hnd,hne->nhde", o[:, idx], kbar[:, idx]
    )
    inner = (
        a[..., None, None] * wv + u[..., :, None] * w[..., None, :] + scaling * (r @ wq)
    )  # (n, H, d, C)
    return wo @ inner.flatten(1, 2)


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
    method: str = "structured",
    memory_mb: int = MEMORY_MB,
    coverage: Coverage | None = None,
) -> list[list[dict[str, float]]]:
    """Per sentence, per layer: ``{'local': γ, 'syntactic': γ, 'unrelated': γ}``; every
    sentence of ``conllu`` unless ``limit`` > 0. ``coverage``, if given, is filled in."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if method == "structured":
        for number, layer in enumerate(model.encoder.layers, 1):
            reason = structured_unsupported(layer.self_attn)
            if reason is not None:
                logger.info(
                    "layer %d: structured Jacobian not applicable (%s): chunked", number, reason
                )
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
        choices=METHODS,
        default="structured",
        help="structured: closed-form Jacobian blocks (plain attention, local_heads, "
        "local_heads_renorm, tied_qk; other layers fall back to chunked, said in the log); "
        "chunked: batched vector-Jacobian products; reference: the whole Jacobian at once "
        "(T²·C² floats). All three give the same numbers; memory of the first two is bounded "
        "by --memory-mb",
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
