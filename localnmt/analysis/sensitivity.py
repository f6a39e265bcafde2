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

No C×C block is ever formed: each squared norm expands into sums over head pairs of
d-dimensional products with Gram blocks of the weights (``W_o^hᵀ W_o^g``, ``W_q^h W_k^gᵀ``,
..., computed once per layer), the query path as ``T·H`` rank-1 terms; O(T²·H²·d + H²·T³)
time and O(H²·T²) memory per layer and sentence, query rows in chunks within ``--memory-mb``.
It applies to plain attention, ``local_heads``, ``local_heads_renorm`` and ``tied_qk`` in eval
mode; any other layer falls back to ``chunked`` (logged). ``--method chunked``: batched
vector–Jacobian products (``torch.func.vmap``), ``T·C`` of them, in chunks within
``--memory-mb``. ``--method reference``: the first, all-at-once implementation (``T²·C²``
floats). The three give the same numbers to float32 precision (tests: ≤ 1e-5 relative; the
structured form reads the recorded float32 probabilities). ``python -m bench.sensitivity``
times the three side by side and prints the process's peak memory. The chunked method holds
one chunk at a time (its products carry no graph of the weights: tests), but its chunk size
comes from a rough per-product estimate (:func:`_bytes_per_product`) that no test checks
against measured memory, so ``--memory-mb`` steers it rather than bounding it exactly; it is
hundreds of times slower than the closed form and meant for short sentences and cross-checks.
"""

from __future__ import annotations

import argparse
import logging
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from localnmt.analysis.conllu import RelationSets
from localnmt.analysis.locality_bias import Coverage, Treebank, load_model
from localnmt.attention import LocalAttention
from localnmt.attention.methods.head_masks import LocalHeads, LocalHeadsRenorm
from localnmt.attention.methods.tied_qk import TiedQK
from localnmt.errors import DataError, UsageError, entry_point

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
    at once (the chunk size follows a rough estimate: see the module docstring).
    ``method="reference"``: the full Jacobian
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

    # Outside no_grad the products would also be differentiable in the layer's weights (which
    # require grad), and β² would keep every chunk's graph alive: memory grew by one chunk's
    # backward per chunk. torch.func.vjp ignores the outer no_grad for its own derivative.
    with torch.no_grad():
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
        tied = next(m for m in attention.modifiers if isinstance(m, TiedQK))
        index = tied.group_of_head.to(weight.device)
        weight, bias = weight.index_select(0, index), bias.index_select(0, index)
    return weight, bias


@dataclass
class _Grams:
    """What the closed form needs of one layer's weights (float64, cached per module):
    per-head projections and the ``(H, H, d, d)`` blocks ``G_hg = A^h B^gᵀ`` of their Grams
    (``A, B ∈ {W_q, W_k, W_v}`` as ``d×C`` blocks, ``o``: ``W_o^hᵀ W_o^g``)."""

    key: tuple
    w: dict[str, Tensor]  # "q", "k", "v": (H, d, C)
    b: dict[str, Tensor]  # (H, d)
    blocks: dict[str, Tensor]  # "o", "vv", "qq", "kk", "vq", "qk", "ovk": (H, H, d, d)
    gram_m: Tensor  # ⟨M_h, M_g⟩_F, M_h = W_o^h W_v^h   (H, H)


#: per attention module (weakly held): its Grams, reused over the sentences
_GRAMS: weakref.WeakKeyDictionary[Any, _Grams] = weakref.WeakKeyDictionary()


def _grams(attention: Any) -> _Grams:
    """The layer's :class:`_Grams`, recomputed only when a weight changed."""
    tensors = [
        t
        for proj in (attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj)
        for t in (proj.weight, proj.bias)
    ]
    key = tuple((t.data_ptr(), t._version, tuple(t.shape)) for t in tensors)
    cached = _GRAMS.get(attention)
    if cached is not None and cached.key == key:
        return cached
    heads, d, dim = attention.num_heads, attention.head_dim, attention.embed_dim
    f64 = torch.float64
    w, b = {}, {}
    with torch.no_grad():
        for name in ("q", "k", "v"):
            weight, bias = _head_weights(attention, getattr(attention, f"{name}_proj"), heads, d)
            w[name], b[name] = weight.to(f64), bias.to(f64)
        wo = attention.out_proj.weight.to(f64).view(dim, heads, d).permute(1, 2, 0)  # W_o^hᵀ

        def block(x: Tensor, y: Tensor) -> Tensor:
            return torch.einsum("hdc,gec->hgde", x, y)

        blocks = {"o": block(wo, wo)}
        for pair in ("vv", "qq", "kk", "vq", "qk", "vk"):
            blocks[pair] = block(w[pair[0]], w[pair[1]])
        # F_hg = Go_gh · G^vk_hg: turns q̂_i^g into W_o^gᵀ W_o^h W_v^h W_k^gᵀ q̂_i^g
        blocks["ovk"] = blocks["o"].transpose(0, 1) @ blocks.pop("vk")
        gram_m = (blocks["o"] * blocks["vv"]).sum((-2, -1))
    _GRAMS[attention] = cached = _Grams(key, w, b, blocks, gram_m)
    return cached


def _jacobian_norms_structured(attention: Any, x: Tensor, memory_mb: int) -> Tensor:
    """β from the closed form of ``∂Y_i/∂x_j`` (module docstring), query rows in chunks.

    With ``a_h = p′_ij``, ``ũ_h = p′_ij v_j − p_ij ō_i``, ``w_h = W_k^hᵀ q̂_i``,
    ``M_h = W_o^h W_v^h``: ``J_ij = A + B (+ Q on the diagonal)`` with ``A = Σ_h a_h M_h``,
    ``B = Σ_h (W_o^h ũ_h) w_hᵀ``, ``Q = Σ_h W_o^h R_i^h W_q^h/√d``; each of ``‖A‖²``, ``‖B‖²``,
    ``⟨A, B⟩`` (and on the diagonal ``‖Q‖²``, ``⟨A, Q⟩``, ``⟨B, Q⟩``) is a sum over head
    pairs of d-dimensional products with the Gram blocks of :class:`_Grams`."""
    g = _grams(attention)
    o_, vv_, qq_, kk_, vq_, qk_, ovk_ = (
        g.blocks[n] for n in ("o", "vv", "qq", "kk", "vq", "qk", "ovk")
    )
    heads, t = attention.num_heads, x.size(0)
    scale = float(attention.scaling)
    f64 = torch.float64
    with torch.no_grad():
        p, pm = (z.to(f64) for z in _probabilities(attention, x))  # (H, T, T)
        xs = x[:, 0].to(f64)  # (T, C)
        q, k, v = (
            torch.einsum("hdc,tc->htd", g.w[n], xs) + g.b[n][:, None] for n in ("q", "k", "v")
        )
        q = q * scale  # q̂
        o = pm @ v  # ō_i = Σ_k p′_ik v_k
        kbar = p @ k  # k̄_i = Σ_k p_ik k_k
        vg = torch.einsum("hgde,gje->hgjd", o_, v)  # Go_hg v_j^g
        og = torch.einsum("hgde,gie->hgid", o_, o)  # Go_hg ō_i^g
        vv = torch.einsum("hjd,hgjd->jhg", v, vg)  # (W_o v_j)^h · (W_o v_j)^g
        oo = torch.einsum("hid,hgid->ihg", o, og)
        ww = torch.einsum("hid,hgde,gie->ihg", q, kk_, q)  # w_h · w_g
        yo = torch.einsum("hgde,gie->ihgd", ovk_, q)  # W_o^gᵀ M_h w_g
        oz = torch.einsum("gid,ihgd->ihg", o, yo)  # (W_o ō_i)^g · M_h w_g
        # query path (diagonal): Q_i = s Σ_{h,k} p′_ik (W_o^h v_k)(W_q^hᵀ (k_k − k̄_i))ᵀ
        vv_full = torch.einsum("hkd,hgld->hkgl", v, vg)  # v_k^hᵀ Go_hg v_l^g
        kk_full = torch.einsum("hkd,hgde,gle->hkgl", k, qq_, k)  # k_k^hᵀ Gq_hg k_l^g
        vvkk = (vv_full, (vv_full * kk_full).view(heads * t, heads * t))
        del kk_full
        pvq = o_ @ vq_.transpose(0, 1)  # Go_hg Gvq_gh = W_o^hᵀ W_o^g W_v^g W_q^hᵀ
        xv = torch.einsum("hkd,hgde,hke->hkg", v, pvq, k)
        per_row = 8 * 12 * t * heads * heads
        chunk = max(1, min(t, memory_mb * 2**20 // per_row))
        beta2 = xs.new_zeros(t, t)
        for start in range(0, t, chunk):
            rows = slice(start, min(start + chunk, t))
            a = pm[:, rows].permute(1, 2, 0)  # a[i, j, h] = p′_ij^h
            b = p[:, rows].permute(1, 2, 0)  # p_ij^h
            vz = torch.einsum("gjd,ihgd->ijhg", v, yo[rows])  # (W_o v_j)^g · M_h w_g
            vo = torch.einsum("hjd,hgid->ijhg", v, og[:, :, rows])  # (W_o v_j)^h·(W_o ō_i)^g
            w2 = ww[rows]
            beta2[rows] = (
                torch.einsum("ijh,hg,ijg->ij", a, g.gram_m, a)  # ‖A‖²
                + 2 * torch.einsum("ijh,ijg,ijhg->ij", a, a, vz)  # 2⟨A, B⟩
                - 2 * torch.einsum("ijh,ijg,ihg->ij", a, b, oz[rows])
                + torch.einsum("ijh,ijg,jhg,ihg->ij", a, a, vv, w2)  # ‖B‖²
                - 2 * torch.einsum("ijh,ijg,ijhg,ihg->ij", a, b, vo, w2)
                + torch.einsum("ijh,ijg,ihg,ihg->ij", b, b, oo[rows], w2)
            )
            # diagonal: + ‖Q‖² + 2⟨A, Q⟩ + 2⟨B, Q⟩ (Q: the query path)
            idx = torch.arange(rows.start, rows.stop, device=x.device)
            pi = pm[:, rows].transpose(0, 1)  # π[i, h, k] = p′_ik^h
            a_ii, b_ii = pm[:, idx, idx].T, p[:, idx, idx].T  # (n, H)
            u = a_ii[..., None] * v[:, idx].transpose(0, 1) - b_ii[..., None] * o[
                :, rows
            ].transpose(0, 1)  # ũ_h = p′_ii v_i − p_ii ō_i   (n, H, d)
            kb = kbar[:, rows]
            # ‖Q‖²/s² = Σ π π VV·(k_k − k̄_i)ᵀ Gq (k_l − k̄_i): the k·k, k·k̄ and k̄·k̄ parts
            gq_kb = torch.einsum("hgde,gie->hgid", qq_, kb)  # Gq_hg k̄_i^g
            e = torch.einsum("hkd,hgid->ihkg", k, gq_kb)  # k_k^hᵀ Gq_hg k̄_i^g
            sv = torch.einsum("hkgl,igl->ihkg", vvkk[0], pi)  # Σ_l VV[h,k,g,l] π[i,g,l]
            norm_q = (
                ((pi.flatten(1) @ vvkk[1]) * pi.flatten(1)).sum(-1)
                - 2 * torch.einsum("ihk,ihkg,ihkg->i", pi, sv, e)
                + torch.einsum("hid,hgid,ihg->i", kb, gq_kb, oo[rows])
            )
            # ⟨A, Q⟩/s = Σ a_g π[h,k] v_k^hᵀ Go_hg Gvq_gh (k_k^h − k̄_i^h)
            pk = torch.einsum("hgde,hie->hgid", pvq, kb)
            y = torch.einsum("hkd,hgid->ihkg", v, pk)
            cross_a = torch.einsum("ig,ihk,hkg->i", a_ii, pi, xv) - torch.einsum(
                "ig,ihk,ihkg->i", a_ii, pi, y
            )
            # ⟨B, Q⟩/s = Σ π[h,k] (ũ_g·Go_gh v_k^h)(q̂_i^gᵀ W_k^g W_q^hᵀ (k_k^h − k̄_i^h))
            u1 = torch.einsum("igd,ghkd->ighk", u, vg)
            qt = torch.einsum("hgde,gie->ighd", qk_, q[:, rows])  # W_q^h W_k^gᵀ q̂_i^g
            u2 = torch.einsum("ighd,hkd->ighk", qt, k) - torch.einsum(
                "ighd,hid->igh", qt, kb
            ).unsqueeze(-1)
            cross_b = torch.einsum("ihk,ighk,ighk->i", pi, u1, u2)
            beta2[idx, idx] += scale**2 * norm_q + 2 * scale * (cross_a + cross_b)
        return beta2.clamp(min=0).sqrt().to(x.dtype)


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
