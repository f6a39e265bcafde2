"""The one attention module of localnmt (docs/design.md, "The pipeline").

``LocalAttention`` has fairseq's ``MultiheadAttention`` parameters (same names and shapes) and
runs::

    q, k, v = proj(x)            (+ incremental cache, static_kv for cross-attention)
    transform                    modifiers may change q / k / v
    logits = q·kᵀ/√d + bias      biases in float32
    restrict                     padding, causal triangle, windows / masks
    p = softmax(logits)          float32
    p = post(p)                  post-softmax modifiers
    o = p·v + value_term
    out = out_proj(o + output_term(o))

With no modifier it gives the numbers of fairseq's ``MultiheadAttention``. It owns its forward:
fairseq's fused fast path would skip every modifier. With ``recording = True`` each forward
leaves an :class:`~localnmt.attention.record.AttentionRecord` in ``last_record``.
"""

from __future__ import annotations

from typing import Any

import torch
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn

from localnmt.attention import shared_source
from localnmt.attention.context import (
    AffinePost,
    AttentionContext,
    AttentionSite,
    BandMask,
    QuadraticBias,
    key_positions_from_padding,
)
from localnmt.attention.deferred import stored, stored_shape
from localnmt.attention.kernels import (
    AttentionProblem,
    dense_probabilities,
    dropped_product,
    fast_attention,
)
from localnmt.attention.modifier import SOURCE_SUFFIX, AttentionModifier, apply_head_selection
from localnmt.attention.record import AttentionRecord
from localnmt.attention.shared_source import GROUP_KEY, grouped_matmul, regroup, source_group
from localnmt.attention.threads import one_thread_if_small

IncrementalState = dict[str, dict[str, Tensor | None]]

_BASE_BUFFER_KEYS = ("prev_key", "prev_value", "prev_key_padding_mask")
#: cross-attention buffers that depend on the source sentence only
_STATIC_SOURCE_KEYS = (*_BASE_BUFFER_KEYS, "key_positions", "key_lengths")


class LocalAttention(MultiheadAttention):
    """Multi-head attention run as a pipeline of modifiers (see module docstring)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        site: AttentionSite,
        modifiers: list[AttentionModifier] | None = None,
        kdim: int | None = None,
        vdim: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        self_attention: bool = False,
        encoder_decoder_attention: bool = False,
        q_noise: float = 0.0,
        qn_block_size: int = 8,
    ):
        super().__init__(
            embed_dim,
            num_heads,
            kdim=kdim,
            vdim=vdim,
            dropout=dropout,
            bias=bias,
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
            self_attention=self_attention,
            encoder_decoder_attention=encoder_decoder_attention,
            q_noise=q_noise,
            qn_block_size=qn_block_size,
        )
        self.site = site
        self.modifiers = nn.ModuleList(modifiers or [])
        for index, modifier in enumerate(self.modifiers):
            modifier.state_prefix = f"m{index}.{modifier.name}."
            modifier.setup(self)
        #: When True, each forward keeps a record of its intermediates in ``last_record``.
        self.recording = False
        self.last_record: AttentionRecord | None = None

    # ---- helpers --------------------------------------------------------------------------
    def _uses(self, stage: str) -> list[AttentionModifier]:
        return [m for m in self.modifiers if m.uses(stage)]

    def _shares_source(self) -> bool:
        """Whether this cross-attention may keep one key/value row per group of hypotheses
        with the same source (:mod:`localnmt.attention.shared_source`)."""
        return (
            shared_source.ENABLED
            and self.encoder_decoder_attention
            and self.bias_k is None
            and not self.add_zero_attn
            and not any(m.reads_keys or m.uses("transform") or m.uses("value_term")
                        or m.uses("output_term") for m in self.modifiers)
        )  # fmt: skip

    def _split_heads(self, x: Tensor, batch: int) -> Tensor:
        """``(T, B, G·d)`` → ``(B, G, T, d)`` with ``d = head_dim``; ``G = H`` unless a modifier
        replaced a projection by a narrower one (tied heads), whose ``transform`` then
        broadcasts the ``G`` groups to the ``H`` heads."""
        return x.contiguous().view(x.size(0), batch, -1, self.head_dim).permute(1, 2, 0, 3)

    def _project(
        self, query: Tensor, key: Tensor | None, value: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        q = self.q_proj(query)
        if self.self_attention:
            return q, self.k_proj(query), self.v_proj(query)
        if key is None:
            assert value is None
            return q, None, None
        assert value is not None
        return q, self.k_proj(key), self.v_proj(value)

    # ---- forward --------------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key: Tensor | None,
        value: Tensor | None,
        key_padding_mask: Tensor | None = None,
        incremental_state: IncrementalState | None = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Tensor | None = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Input ``(T, B, C)``; returns ``(out (T, B, C), weights)`` with fairseq's shapes:
        weights ``(B, Tq, Tk)`` averaged over heads, or ``(H, B, Tq, Tk)`` with
        ``need_head_weights``."""
        need_weights = need_weights or need_head_weights
        tgt_len, bsz, embed_dim = query.size()
        assert embed_dim == self.embed_dim, f"query dim {embed_dim} != {self.embed_dim}"

        saved_state: dict[str, Any] | None = None
        key_group = 1  # hypotheses per stored key row (shared_source)
        if incremental_state is not None:
            saved_state = self._get_input_buffer(incremental_state)
            if "prev_key" in saved_state and static_kv:
                assert self.encoder_decoder_attention and not self.self_attention
                key = value = None
                key_group = int(saved_state.get(GROUP_KEY, 1))
            elif static_kv and key is not None and value is not None and self._shares_source():
                # the first step: project each group of equal source rows once
                key_group = source_group(key, value, key_padding_mask)
                if key_group > 1:
                    key, value = key[:, ::key_group], value[:, ::key_group]
                    saved_state[GROUP_KEY] = torch.tensor(key_group)

        q, k, v = self._project(query, key, value)
        q = q * self.scaling
        if self.bias_k is not None:
            assert k is not None and v is not None
            k, v, attn_mask, key_padding_mask = self._add_bias(
                k, v, attn_mask, key_padding_mask, bsz
            )
        q = self._split_heads(q, bsz)
        k = None if k is None else self._split_heads(k, bsz // key_group)
        v = None if v is None else self._split_heads(v, bsz // key_group)

        query_offset = None
        if saved_state is not None:
            k, v, key_padding_mask = self._update_cache(
                saved_state, k, v, key_padding_mask, static_kv, bsz
            )
            if self.encoder_decoder_attention and len(self.modifiers) > 0:
                # the decoder step of each hypothesis, for modifiers that read query positions
                query_offset = saved_state.get("query_offset")
                saved_state["query_offset"] = (
                    torch.zeros(bsz, device=q.device) if query_offset is None else query_offset
                ) + tgt_len
            assert incremental_state is not None
            self._set_input_buffer(incremental_state, saved_state)
        assert k is not None and v is not None

        if key_padding_mask is not None and key_padding_mask.dim() == 0:
            key_padding_mask = None
        if self.add_zero_attn:
            k, v, key_padding_mask, attn_mask = self._zero_attn(k, v, key_padding_mask, attn_mask)

        # decoding steps and small batches: the map is too small to share among threads
        with one_thread_if_small(bsz * self.num_heads * tgt_len * k.size(2), q.device):
            ctx = self._context(query, q, k, v, key_padding_mask, saved_state, query_offset)
            ctx.key_group = key_group
            for modifier in self._uses("transform"):
                modifier.transform(ctx)
            problem = self._problem(ctx, key_padding_mask, attn_mask)
            if before_softmax:
                from localnmt.attention.kernels import dense_logits

                logits = dense_logits(problem)
                values = ctx.v.repeat_interleave(key_group, dim=0) if key_group > 1 else ctx.v
                return logits.view(-1, *logits.shape[2:]).type_as(query), values.reshape(
                    -1, *values.shape[2:]
                )
            out, probs = self._attend(ctx, problem, need_weights)
            for modifier in self._uses("output_term"):
                term = modifier.output_term(ctx, out)
                if term is not None:
                    out = out + apply_head_selection(modifier, term, 0.0)
        if self.recording:
            self.last_record = ctx.record

        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        out = self.out_proj(out)
        weights: Tensor | None = None
        if need_weights and probs is not None:
            weights = probs.transpose(0, 1)  # (H, B, Tq, Tk)
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return out, weights

    def _attend(
        self, ctx: AttentionContext, problem: AttentionProblem, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """``(out (B, H, Tq, d), probs or None)``: the dense path where probabilities are
        needed (weights, post-softmax modifiers, value terms, recording), else a kernel."""
        post_mods = self._uses("post")
        value_mods = self._uses("value_term")
        if not (need_weights or value_mods or self.recording):
            if not post_mods:
                return fast_attention(problem), None
            affine = self._affine_post(ctx, problem, post_mods)
            if affine is not None:
                return self._attend_affine(problem, affine), None
        post = (lambda p: self._post(ctx, p, post_mods)) if post_mods else None
        probs, logits = dense_probabilities(problem, post)
        # one dropout mask for p @ V and every value term: Shaw et al.'s eq. 3 is
        # Σ_j α_ij (v_j + a^V_ij) with one α, and BLOCK's gate mixes this very p @ V
        out, used = dropped_product(problem, probs, self.dropout_module)
        for modifier in value_mods:
            term = modifier.value_term(ctx, used)
            if term is not None:
                out = out + apply_head_selection(modifier, term, 0.0)
        if ctx.record is not None:
            ctx.record.logits = logits.detach()
            ctx.record.probs = probs.detach()
            if ctx.record.probs_before_post is None:  # no post stage: the same tensor
                ctx.record.probs_before_post = ctx.record.probs
        return out, probs

    @staticmethod
    def _affine_post(
        ctx: AttentionContext, problem: AttentionProblem, modifiers: list[AttentionModifier]
    ) -> AffinePost | None:
        """The post stage as ``p ↦ keep·p + add`` where its one modifier (on every head) offers
        it and dropout does not act on ``p`` (dropped probabilities are not affine in ``p``)."""
        if len(modifiers) != 1 or modifiers[0].head_selection is not None:
            return None
        if problem.dropout_p > 0.0:
            return None
        return modifiers[0].post_affine(ctx)

    @staticmethod
    def _attend_affine(problem: AttentionProblem, affine: AffinePost) -> Tensor:
        """``(keep·p + add) @ V`` as ``keep·(p @ V)`` from a fused kernel plus ``add @ V``."""
        out = None
        if not (isinstance(affine.keep, float) and affine.keep == 0.0):
            out = fast_attention(problem) * affine.keep
        if affine.add is not None:
            added = grouped_matmul(affine.add.type_as(problem.v), problem.v, problem.key_group)
            out = added if out is None else out + added
        assert out is not None, "an affine post stage with keep = 0 must add something"
        return out

    def _update_cache(
        self,
        saved_state: dict[str, Any],
        k: Tensor | None,
        v: Tensor | None,
        key_padding_mask: Tensor | None,
        static_kv: bool,
        bsz: int,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Append the new keys/values to the cache (or reuse it for static_kv)."""
        if "prev_key" in saved_state:
            prev_key, prev_value = saved_state["prev_key"], saved_state["prev_value"]
            if static_kv:
                k, v = prev_key, prev_value
            else:
                assert k is not None and v is not None
                k = torch.cat([prev_key, k], dim=2)
                v = torch.cat([prev_value, v], dim=2)
        elif static_kv and k is not None and v is not None:
            # the source's keys and values are read at every decoding step: store them in
            # (B, H, Tk, d) order once (the projection's layout is (Tk, B, H, d), so reading
            # it as (B, H, Tk, d) strides over the whole batch for every key)
            k, v = k.contiguous(), v.contiguous()
        assert k is not None and v is not None
        key_padding_mask = MultiheadAttention._append_prev_key_padding_mask(
            key_padding_mask=key_padding_mask,
            prev_key_padding_mask=saved_state.get("prev_key_padding_mask"),
            batch_size=bsz,
            src_len=k.size(2),
            static_kv=static_kv,
        )
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.bool()  # fairseq's helper returns floats
        saved_state["prev_key"] = k
        saved_state["prev_value"] = v
        saved_state["prev_key_padding_mask"] = key_padding_mask
        return k, v, key_padding_mask

    def _zero_attn(
        self, k: Tensor, v: Tensor, key_padding_mask: Tensor | None, attn_mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        zeros = k.new_zeros(k.size(0), k.size(1), 1, k.size(3))
        k, v = torch.cat([k, zeros], dim=2), torch.cat([v, zeros], dim=2)
        if attn_mask is not None:
            attn_mask = torch.cat([attn_mask, attn_mask.new_zeros(attn_mask.size(0), 1)], dim=1)
        if key_padding_mask is not None:
            pad = key_padding_mask.new_zeros(key_padding_mask.size(0), 1)
            key_padding_mask = torch.cat([key_padding_mask, pad], dim=1)
        return k, v, key_padding_mask, attn_mask

    def _context(
        self,
        query: Tensor,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        key_padding_mask: Tensor | None,
        saved_state: dict[str, Any] | None,
        query_offset: Tensor | None,
    ) -> AttentionContext:
        bsz, _, tq, _ = q.shape
        tk = k.size(2)

        def source_positions() -> tuple[Tensor, Tensor]:
            if not self.encoder_decoder_attention or saved_state is None:
                return key_positions_from_padding(key_padding_mask, bsz, tk, q.device)
            # the source is the same at every decoding step: compute once per sentence batch
            cached = saved_state.get("key_positions")
            if cached is None or cached.shape != (bsz, tk):
                key_pos, lengths = key_positions_from_padding(key_padding_mask, bsz, tk, q.device)
                saved_state["key_positions"], saved_state["key_lengths"] = key_pos, lengths
            return saved_state["key_positions"], saved_state["key_lengths"]

        def positions() -> tuple[Tensor, Tensor, Tensor]:
            key_pos, lengths = source_positions()
            if self.self_attention:
                query_pos = key_pos[:, tk - tq :]
                if self.site.causal:
                    return key_pos, query_pos, query_pos + 1.0
                return key_pos, query_pos, lengths[:, None].expand(bsz, tq)
            steps = torch.arange(tq, device=q.device, dtype=torch.float32)
            offset = 0.0 if query_offset is None else query_offset[:, None]
            query_pos = (steps[None, :] + offset).expand(bsz, tq)
            return key_pos, query_pos, lengths[:, None].expand(bsz, tq)

        return AttentionContext(
            site=self.site,
            query_input=query,
            q=q,
            k=k,
            v=v,
            key_padding_mask=key_padding_mask,
            positions_fn=positions,
            state=saved_state,
            record=AttentionRecord() if self.recording else None,
        )

    def _problem(
        self, ctx: AttentionContext, key_padding_mask: Tensor | None, attn_mask: Tensor | None
    ) -> AttentionProblem:
        problem = AttentionProblem(
            ctx=ctx,
            q=ctx.q,
            k=stored(ctx, "k"),  # a deferred layout stays unbuilt until a kernel reads it
            v=stored(ctx, "v"),
            key_padding_mask=None if key_padding_mask is None else key_padding_mask.bool(),
            dropout_p=self.dropout_module.p if self._dropout_active() else 0.0,
            key_group=ctx.key_group,
            padding_source=key_padding_mask,
        )
        if ctx.key_padding_mask is not key_padding_mask:  # a transform changed the key set
            problem.key_padding_mask = ctx.key_padding_mask
        self._add_attn_mask(problem, attn_mask)
        for modifier in self._uses("bias"):
            self._add_bias_term(problem, modifier, modifier.bias(ctx))
        for modifier in self._uses("restrict"):
            self._add_restriction(problem, modifier, modifier.restrict(ctx))
        return problem

    def _dropout_active(self) -> bool:
        return self.training or self.dropout_module.apply_during_inference

    def _add_attn_mask(self, problem: AttentionProblem, attn_mask: Tensor | None) -> None:
        """fairseq's ``attn_mask`` (bool: True = blocked; float: additive, −inf = blocked)."""
        if attn_mask is None:
            return
        if attn_mask.dtype == torch.bool or not attn_mask.is_floating_point():
            blocked = attn_mask.bool()
            additive = None
        else:
            blocked = torch.isneginf(attn_mask)
            additive = attn_mask.float().masked_fill(blocked, 0.0)
            if not additive.any():
                additive = None
        tq, tk = problem.q.size(2), stored_shape(problem, "k")[2]
        causal = torch.ones(tq, tk, dtype=torch.bool, device=blocked.device).triu(tk - tq + 1)
        if self.site.causal and blocked.shape == (tq, tk) and torch.equal(blocked, causal):
            problem.causal = True
        elif blocked.any():
            problem.allowed = ~blocked
        if additive is not None:
            problem.dense_bias = additive

    @staticmethod
    def _add_bias_term(
        problem: AttentionProblem, modifier: AttentionModifier, bias: Tensor | QuadraticBias | None
    ) -> None:
        if bias is None:
            return
        if isinstance(bias, QuadraticBias):
            if modifier.head_selection is not None:
                bias = QuadraticBias(
                    apply_head_selection(modifier, bias.a, 0.0),
                    apply_head_selection(modifier, bias.b, 0.0),
                )
            problem.quadratic.append(bias)
            return
        bias = apply_head_selection(modifier, bias.float(), 0.0)
        problem.dense_bias = bias if problem.dense_bias is None else problem.dense_bias + bias

    @staticmethod
    def _add_restriction(
        problem: AttentionProblem, modifier: AttentionModifier, allowed: Tensor | BandMask | None
    ) -> None:
        if allowed is None:
            return
        if isinstance(allowed, BandMask):
            sel = modifier.head_selection
            if sel is not None:
                unlimited = torch.full_like(sel, 1 << 30, dtype=torch.long)
                left = torch.as_tensor(allowed.left, device=sel.device).expand(sel.shape)
                right = torch.as_tensor(allowed.right, device=sel.device).expand(sel.shape)
                allowed = BandMask(
                    torch.where(sel, left, unlimited), torch.where(sel, right, unlimited)
                )
            problem.bands.append(allowed)
            return
        allowed = apply_head_selection(modifier, allowed.bool(), True)
        problem.allowed = allowed if problem.allowed is None else problem.allowed & allowed

    @staticmethod
    def _post(ctx: AttentionContext, probs: Tensor, modifiers: list[AttentionModifier]) -> Tensor:
        if ctx.record is not None:
            ctx.record.probs_before_post = probs.detach()
        for modifier in modifiers:
            probs = apply_head_selection(modifier, modifier.post(ctx, probs), probs)
        return probs

    # ---- incremental state ------------------------------------------------------------------
    @torch.jit.unused
    def reorder_incremental_state(
        self, incremental_state: IncrementalState, new_order: Tensor
    ) -> IncrementalState:
        """Reorder every cached tensor by hypothesis, modifiers' state included (fairseq's own
        version skips cross-attention buffers whose batch size already matches)."""
        input_buffer = self._get_input_buffer(incremental_state)
        if input_buffer:
            grouped = (
                self.encoder_decoder_attention
                and input_buffer.get("prev_key") is not None
                and (GROUP_KEY in input_buffer or self._shares_source())
            )
            if grouped:
                self._reorder_shared_source(input_buffer, new_order)
            for name, value in list(input_buffer.items()):
                if value is None or (grouped and name in ("prev_key", "prev_value", GROUP_KEY)):
                    continue
                if (
                    (name in _STATIC_SOURCE_KEYS or name.endswith(SOURCE_SUFFIX))
                    and self.encoder_decoder_attention
                    and value.size(0) == new_order.size(0)
                ):
                    # beam search reorders hypotheses within a sentence, and every hypothesis
                    # of a sentence has the same source: nothing to move (fairseq skips too)
                    continue
                input_buffer[name] = value.index_select(0, new_order)
            incremental_state = self._set_input_buffer(incremental_state, input_buffer)
        return incremental_state

    @staticmethod
    def _reorder_shared_source(buffer: dict[str, Any], new_order: Tensor) -> None:
        """Keys and values stored once per group of hypotheses (shared_source): they stay
        while hypotheses are reordered within their sentences, like fairseq's cached source
        keys; when the batch changes size (finished sentences leave it, or the first step
        ran once per sentence and is now spread to every hypothesis) the rows still read
        are kept and regrouped."""
        group = int(buffer.get(GROUP_KEY, 1))
        if new_order.size(0) == buffer["prev_key"].size(0) * group:
            return
        keep, new_group = regroup(torch.div(new_order, group, rounding_mode="floor"))
        for name in ("prev_key", "prev_value"):
            buffer[name] = buffer[name].index_select(0, keep)
        buffer[GROUP_KEY] = torch.tensor(new_group)
