"""Relative position representations (Shaw et al. 2018), re-implemented as in Yang et al.
(2018, Table 4, "Rel_Pos").

Shaw et al. (2018), eqs. 3–5 (as numbered in that paper)::

    e_ij   = q_i · (k_j + a^K_ij) / √d                 (4)   → bias stage: q_i·a^K_ij / √d
    z_i    = Σ_j α_ij (v_j + a^V_ij)                   (3)   → value_term stage: Σ_j α_ij a^V_ij
    a^K_ij = w^K_clip(j−i, k),  a^V_ij = w^V_clip(j−i, k),  clip(x, k) = max(−k, min(k, x))  (5)

``w^K`` and ``w^V`` are ``(2k+1) × head_dim`` tables, one pair per layer, shared across heads.

Choices: ``clip`` defaults to k = 16 (the authors' THUMT code for Yang et al.'s Table 4 uses
k = 16); distances are ``ctx.key_positions − ctx.query_positions`` (counted from each sentence's
first real token, also in incremental decoding). Shaw et al. use self-attention only; the
authors' code for Yang et al. (``transformer_pos``) also adds the tables to encoder-decoder
attention, with the distance between source position j and target step i, so ``cross`` is a
valid site here too. That code has a 2k-row table (distances −k..k−1); we keep Shaw's 2k+1 rows
(−k..k). Sizes: 2·33·64 = 4,224 parameters per layer: +0.05M for the 12 self-attention layers
of a base model, +0.08M with the 6 cross-attention layers (Yang et al. Table 4: +0.1M from
rounded totals). The value term needs the probabilities. So the bias and the value term go
to the kernels together, as :class:`~localnmt.attention.context.RelativeTerms` (tables and
buckets): on the CPU a C kernel adds both inside its loops (``fast/relative.py``); elsewhere,
or combined with another value term, the dense reference path runs. In a decoding step, with
one query per row, ``a^K_ij`` and ``a^V_ij`` depend on ``j`` alone, and eqs. 3–4 are plain
attention over ``k_j + a^K_ij`` and ``v_j + a^V_ij``, which any kernel computes
(:meth:`RelativePosition.key_value_terms`).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from localnmt.attention.context import AttentionContext, AttentionSite, CacheKey, RelativeTerms
from localnmt.attention.modifier import AttentionModifier, SpecError, option, register_modifier


@register_modifier
class RelativePosition(AttentionModifier):
    """Clipped relative key and value embeddings (Shaw et al. 2018)."""

    name = "rel_pos"
    sites = ("encoder_self", "decoder_self", "cross")

    @dataclass
    class Options:
        clip: int = option(16, "clipping distance k (Shaw et al.: 16)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        if not 0 <= options.clip <= site.max_positions:  # no distance is larger: rows unused
            raise SpecError(
                f"option 'clip' of method 'rel_pos' must be between 0 and {site.max_positions} "
                f"(the model's positions), got {options.clip}"
            )

    def __init__(self, options: Options, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        size = 2 * options.clip + 1
        self.rel_key = nn.Embedding(size, site.head_dim)  # w^K
        self.rel_value = nn.Embedding(size, site.head_dim)  # w^V
        nn.init.xavier_uniform_(self.rel_key.weight)
        nn.init.xavier_uniform_(self.rel_value.weight)
        self._may_fold = False
        self._plain_keys = True

    def setup(self, attention: nn.Module) -> None:
        self._plain_keys = attention.bias_k is None and not attention.add_zero_attn
        # the fold adds to k and v as the projections give them: no method reshapes them
        self._may_fold = self.head_selection is None and not any(
            m.uses("transform") for m in attention.modifiers
        )

    def key_value_terms(self, ctx: AttentionContext) -> tuple[Tensor, Tensor] | None:
        """``(a^K_ij, a^V_ij)`` over the keys ``j`` of a decoding step (one query ``i`` per
        row, no gradients), broadcastable to ``k`` and ``v``: the pipeline adds them to the
        keys and values, and the bias and the value term drop out of this call. None
        elsewhere."""
        if not (self._may_fold and ctx.q.size(2) == 1 and not torch.is_grad_enabled()
                and not ctx.recording and ctx.key_group == 1):  # fmt: skip
            return None
        step = self.step_buckets(ctx)  # (Tk,): the same rows for every hypothesis
        idx = self.buckets(ctx)[:, :, 0, :] if step is None else step  # else (B, 1, Tk)
        ctx.cache.get(self._folded_key, lambda: True)
        return self._rows(idx)

    def step_key_value_terms(
        self, keys: int, device: torch.device, incremental: bool
    ) -> tuple[Tensor, Tensor] | None:
        """``(a^K_ij, a^V_ij)`` ``(Tk, d)`` of :meth:`key_value_terms` at a one-query step of
        self-attention (:meth:`step_buckets`), for the pipeline's shortcut: the same gather."""
        if not (self._may_fold and self.site.kind != "cross") or torch.is_grad_enabled():
            return None
        if not (incremental or (self._plain_keys and (self.site.causal or keys == 1))):
            return None
        return self._step_rows(keys, device)

    def _step_rows(self, keys: int, device: torch.device) -> tuple[Tensor, Tensor]:
        """:meth:`_rows` at :func:`_step_buckets` for ``keys`` keys: the last ``keys`` rows of
        a longer gather, kept while the tables stay as they are (a step's buckets are the
        last ones of any longer step's: key ``j`` of ``Tk`` sits at distance ``j − Tk + 1``),
        so that a decoding step, whose ``Tk`` grows by one, gathers nothing. Tables that are
        not plain parameters (``torch.nn.utils.parametrize`` computes them anew at each
        access, so no address or version tells a change) are gathered at every step."""
        key_table = self.rel_key._parameters.get("weight")
        value_table = self.rel_value._parameters.get("weight")
        if key_table is None or value_table is None:
            return self._rows(_step_buckets(self.options.clip, keys, device))
        stamp = (device, torch.is_inference_mode_enabled(), key_table.data_ptr(),
                 key_table._version, value_table.data_ptr(), value_table._version)  # fmt: skip
        kept = _kept_rows.get(self)
        if kept is None or kept[0] != stamp or kept[1] < keys:
            longest = max(keys, 2 * kept[1] if kept is not None and kept[0] == stamp else 64)
            kept = (stamp, longest, self._rows(_step_buckets(self.options.clip, longest, device)))
            _kept_rows[self] = kept
        _, longest, (key_rows, value_rows) = kept
        return key_rows[longest - keys :], value_rows[longest - keys :]

    def _rows(self, buckets: Tensor) -> tuple[Tensor, Tensor]:
        """The rows ``a^K``, ``a^V`` of both tables at ``buckets`` (one gather each)."""
        tables = (self.rel_key.weight, self.rel_value.weight)
        if buckets.dim() == 1:
            return tables[0].index_select(0, buckets), tables[1].index_select(0, buckets)
        return F.embedding(buckets, tables[0]), F.embedding(buckets, tables[1])

    @functools.cached_property
    def _folded_key(self) -> CacheKey[bool]:
        return CacheKey("rel_pos folded into keys", self)

    def _folded(self, ctx: AttentionContext) -> bool:
        return ctx.cache.get(self._folded_key, lambda: False)

    def value_term_needed(self, ctx: AttentionContext) -> bool:
        return not self._folded(ctx)

    def step_buckets(self, ctx: AttentionContext) -> Tensor | None:
        """``clip(j − i, k) + k`` as int64 ``(Tk,)`` for one query per row of self-attention
        without padding, where it is the same for every row: key ``j`` sits at ``j`` and the
        query at ``Tk − 1`` (a decoding step, with fairseq's cache or another's; or a
        one-token sentence). None elsewhere (:meth:`buckets`), also when a modifier before
        this one has read or moved the positions, or keys were appended (``add_bias_kv``,
        ``add_zero_attn``)."""
        if not (ctx.q.size(2) == 1 and ctx.site.kind != "cross"):
            return None
        if ctx.key_padding_mask is not None or ctx.positions_computed:
            return None
        tk = ctx.k.size(2)
        if not (ctx.incremental or (self._plain_keys and (ctx.site.causal or tk == 1))):
            return None
        return _step_buckets(self.options.clip, tk, ctx.k.device)

    def buckets(self, ctx: AttentionContext) -> Tensor:
        """``clip(j − i, k) + k`` as int64 ``(B, 1, Tq, Tk)`` (eq. 5), computed once per call
        (the bias and the value term share it)."""
        k = self.options.clip

        def build() -> Tensor:
            rel = ctx.key_positions[:, None, :] - ctx.query_positions[:, :, None]
            return (rel.round().long().clamp(-k, k) + k).unsqueeze(1)

        return ctx.cache.get(self._buckets_key, build)

    @functools.cached_property
    def _buckets_key(self) -> CacheKey[Tensor]:  # shared by the rel_pos methods of one clip
        return CacheKey("rel_pos buckets", self.options.clip)

    @functools.cached_property
    def _terms_key(self) -> CacheKey[RelativeTerms]:
        return CacheKey("rel_pos terms", self)

    def relative_terms(self, ctx: AttentionContext) -> RelativeTerms | None:
        """The tables and buckets of this call (one object per call: the bias and the value
        term share it); None in a decoding step of one query per row (:meth:`step_buckets`)
        or where the call folded the terms into the keys and values."""
        if self._folded(ctx) or self.step_buckets(ctx) is not None:
            return None
        return ctx.cache.get(
            self._terms_key,
            lambda: RelativeTerms(self.rel_key.weight, self.rel_value.weight, self.buckets(ctx)),
        )

    def bias(self, ctx: AttentionContext) -> Tensor | RelativeTerms | None:
        """``q_i · a^K_ij`` (q is already scaled by 1/√d): the :class:`RelativeTerms`, which
        the problem computes or hands to a kernel; in a decoding step of one query per row,
        float32 ``(B, H, 1, Tk)``; None where the call folded it into the keys
        (:meth:`key_value_terms`)."""
        if self._folded(ctx):
            return None
        step = self.step_buckets(ctx)
        if step is None:
            return self.relative_terms(ctx)
        table = self.rel_key.weight  # q_i · w^K_b(j) with the rows a^K_ij = w^K_b(j) gathered
        return torch.matmul(ctx.q.to(table.dtype), table.index_select(0, step).t()).float()

    def value_term(self, ctx: AttentionContext, probs: Tensor) -> Tensor:
        """``Σ_j α_ij a^V_ij``: probabilities summed per distance bucket, times w^V (one
        decoding step: ``α_i · a^V_i`` with the rows ``a^V_ij`` gathered)."""
        table = self.rel_value.weight
        step = self.step_buckets(ctx)
        if step is not None:
            return torch.matmul(probs.to(table.dtype), table.index_select(0, step)).to(ctx.v.dtype)
        terms = self.relative_terms(ctx)
        assert terms is not None  # not folded: value_term_needed
        return terms.value_term(probs, ctx.v.dtype)


#: Per method module: ``(stamp of its tables, length, (a^K rows, a^V rows))`` of
#: :meth:`RelativePosition._step_rows` (not in the module: nothing of it is saved or copied).
_kept_rows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=256)
def _step_buckets(clip: int, keys: int, device: torch.device) -> Tensor:
    """:meth:`RelativePosition.step_buckets` for ``keys`` keys (kept: the same few lengths
    recur at every decoding step; never written to)."""
    return torch.arange(clip + 1 - keys, clip + 1, device=device).clamp_(min=0)
