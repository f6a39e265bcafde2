"""Closed form of the self-attention Jacobian norms (Pande et al. 2021 §3.1, eq. 5–7).

``β[i, j] = ‖∂Y[i]/∂X[j]‖_F`` for ``method="structured"`` of
:func:`localnmt.analysis.jacobian_norms.jacobian_norms`. Per head h
(``q̂_i = (W_q x_i + b_q)/√d``, ``k_j``, ``v_j`` likewise, ``p = softmax_k(q̂_i·k_k)`` after any
fixed window, ``p′ = m ⊙ p`` with a fixed post-softmax mask ``m`` (local heads, eq. 9; ``m = 1``
otherwise), ``ō_i = Σ_k p′_ik v_k``, ``k̄_i = Σ_k p_ik k_k``, ``Y_i = Σ_h W_o^h ō_i^h + b_o``)::

    ∂Y_i/∂x_j = Σ_h W_o^h [ p′_ij W_v^h + (p′_ij v_j − p_ij ō_i) (W_k^hᵀ q̂_i)ᵀ
                            + δ_ij R_i^h W_q^h/√d ],    R_i = Σ_k p′_ik v_k k_kᵀ − ō_i k̄_iᵀ

No C×C block is ever formed: each squared norm expands into sums over head pairs of
d-dimensional products with Gram blocks of the weights (``W_o^hᵀ W_o^g``, ``W_q^h W_k^gᵀ``,
..., computed once per layer), the query path as ``T·H`` rank-1 terms; O(T²·H²·d + H²·T³)
time and O(H²·T²) memory per layer and sentence, query rows in chunks within ``memory_mb``.
It applies to plain attention, ``local_heads``, ``local_heads_renorm`` and ``tied_qk`` in eval
mode (:func:`structured_unsupported` says why not elsewhere).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from localnmt.attention import LocalAttention
from localnmt.attention.methods.head_masks import LocalHeads, LocalHeadsRenorm
from localnmt.attention.methods.tied_qk import TiedQK

#: Modifiers whose attention pattern is fixed: the closed form of ``method="structured"``.
_STRUCTURED_MODIFIERS = (LocalHeads, LocalHeadsRenorm, TiedQK)


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


def structured_jacobian_norms(attention: Any, x: Tensor, memory_mb: int) -> Tensor:
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
