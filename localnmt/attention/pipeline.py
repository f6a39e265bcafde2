"""The one attention module of localnmt (docs/design.md, "The pipeline").

``LocalAttention`` is plain PyTorch: it has fairseq's ``MultiheadAttention`` parameters (same
names, shapes and initialisation: :mod:`~localnmt.attention.multihead_parameters`) and runs::

    q, k, v = proj(x)            (+ incremental cache, static_kv for cross-attention)
    transform                    modifiers may change q / k / v
    logits = q·kᵀ/√d + bias      biases in float32
    restrict                     padding, causal triangle, windows / masks
    p = softmax(logits)          float32
    p = post(p)                  post-softmax modifiers
    o = p·v + value_term
    out = out_proj(o + output_term(o))

With no modifier it gives the numbers of fairseq's ``MultiheadAttention``. The framework adapters
(:mod:`localnmt.fairseq_plugin`, :mod:`localnmt.hf`) hold it or call :meth:`attend_heads` on
projections of their own; nothing here imports a framework. With ``recording = True`` each forward
leaves an :class:`~localnmt.attention.record.AttentionRecord` in ``last_record``.

The forward is the orchestration; each concern is a module of its own: the decoding buffer
and beam search's shared source (:mod:`~localnmt.attention.incremental`), positions
(:mod:`~localnmt.attention.positions`), fairseq's masks and the modifiers' biases and
restrictions turned into a problem (:mod:`~localnmt.attention.problem_builder`), the kernels
(:mod:`~localnmt.attention.problem`), the affine-post shortcut
(:mod:`~localnmt.attention.affine_post`) and the record (:mod:`~localnmt.attention.record`).
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor, nn

from localnmt.attention import shared_source, step_plan
from localnmt.attention.affine_post import affine_post, attend_affine, fused_output
from localnmt.attention.context import AttentionContext, AttentionSite
from localnmt.attention.incremental import DecodingBuffer, IncrementalState, reorder_buffer
from localnmt.attention.modifier import AttentionModifier, apply_head_selection
from localnmt.attention.multihead_parameters import MultiheadParameters, pad_masks_by_one
from localnmt.attention.positions import positions_of_call
from localnmt.attention.problem import (
    REGISTRY,
    AttentionProblem,
    dense_logits,
    dense_probabilities,
    dropped_product,
    fast_attention,
    note_reference,
)
from localnmt.attention.problem_builder import build_problem
from localnmt.attention.record import AttentionRecord
from localnmt.attention.threads import one_thread_if_small
from localnmt.attention.unused import distributed_training, keep_in_graph

__all__ = ["IncrementalState", "LocalAttention"]

#: The attention kernel prepared at a layer's first plain one-query step (relative positions'
#: shortcut), with the device and dtype it was prepared for, by layer: kept outside the module,
#: so that nothing of it is saved, pickled or copied with the model.
_plain_step_kernels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plain_step(owner: LocalAttention, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """:func:`fast_attention` on the plain problem ``(q, k, v)`` of ``owner``'s site, through
    the kernel prepared at an earlier step on the same device and dtype where it may run
    (:meth:`~localnmt.attention.dispatch.KernelRegistry.prepared`: not while traced, logged or
    forced, and again after the registry changed)."""
    kept = _plain_step_kernels.get(owner)
    if kept is not None and kept[0] == (q.device, q.dtype):
        out = kept[1](q, k, v)
        if out is not None:
            return out
    problem = AttentionProblem(site=owner.site, q=q, k=k, v=v)
    prepared = REGISTRY.prepared(problem)
    if prepared is not None:
        _plain_step_kernels[owner] = ((q.device, q.dtype), prepared)
    return fast_attention(problem)


class LocalAttention(MultiheadParameters):
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
        """The modifiers that override ``stage``, in order (found once per stage: the list of
        modifiers is fixed at construction, and a decoding step asks five times)."""
        found = self.__dict__.setdefault("_stage_users", {})  # also a module pickled before
        users = found.get(stage)
        if users is None:
            users = found[stage] = [m for m in self.modifiers if m.uses(stage)]
        return users

    def _one_method(self) -> AttentionModifier | None:
        """The layer's modifier where it has exactly one, else None (found once, as
        :meth:`_uses`: a decoding step asks, and ``nn.ModuleList`` indexing is slow)."""
        found = self.__dict__.setdefault("_stage_users", {})
        if "_one" not in found:
            found["_one"] = self.modifiers[0] if len(self.modifiers) == 1 else None
        return found["_one"]

    def _discards_logits(self) -> bool:
        """Whether a modifier replaces the distribution outright (found once, as
        :meth:`_uses`): distributed training then links q, k and the modifiers' parameters
        to the output with zero gradients (:mod:`localnmt.attention.unused`)."""
        found = self.__dict__.setdefault("_stage_users", {})
        if "_discards" not in found:
            found["_discards"] = any(m.discards_logits for m in self.modifiers)
        return found["_discards"]

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

    def _dropout_active(self) -> bool:
        return self.training or self.dropout_module.apply_during_inference

    def _dropout_p(self) -> float:
        return self.dropout_module.p if self._dropout_active() else 0.0

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

        buffer: DecodingBuffer | None = None
        if incremental_state is not None:
            buffer, key, value = DecodingBuffer.open(
                self, incremental_state, key, value, key_padding_mask, static_kv,
                self._shares_source(),
            )  # fmt: skip
        key_group = 1 if buffer is None else buffer.key_group  # hypotheses per stored key row

        q, k, v = self._project(query, key, value)
        q = q * self.scaling
        if self.bias_k is not None:
            assert k is not None and v is not None
            k, v, key_padding_mask, attn_mask = self._add_bias(
                k, v, key_padding_mask, attn_mask, bsz
            )
        q = self._split_heads(q, bsz)
        k = None if k is None else self._split_heads(k, bsz // key_group)
        v = None if v is None else self._split_heads(v, bsz // key_group)

        query_offset = None
        if buffer is not None:
            k, v, key_padding_mask = buffer.append(k, v, key_padding_mask, static_kv, bsz)
            if self.encoder_decoder_attention and len(self.modifiers) > 0:
                # the decoder step of each hypothesis, for modifiers that read query positions
                query_offset = buffer.advance_queries(bsz, tgt_len, q.device)
            assert incremental_state is not None
            self._set_input_buffer(incremental_state, buffer.entries)
        assert k is not None and v is not None

        if before_softmax:
            return self._logits_and_values(query, q, k, v, key_padding_mask, attn_mask, buffer,
                                           query_offset, key_group)  # fmt: skip
        out, probs = self.attend_heads(
            query, q, k, v, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            state=None if buffer is None else buffer.entries, query_offset=query_offset,
            key_group=key_group, need_weights=need_weights,
        )  # fmt: skip

        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.embed_dim)
        out = self.out_proj(out)
        weights: Tensor | None = None
        if need_weights and probs is not None:
            weights = probs.transpose(0, 1)  # (H, B, Tq, Tk)
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return out, weights

    def attend_heads(
        self,
        query_input: Tensor | None,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        state: dict | None = None,
        query_offset: Tensor | None = None,
        key_group: int = 1,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """The pipeline on projected heads: ``q`` ``(B, H, Tq, d)`` already scaled by
        ``1/√d``, ``k`` and ``v`` ``(B/key_group, H, Tk, d)`` (cached keys included),
        ``query_input`` the layer input ``(Tq, B, C)`` the queries came from (None where no
        method reads it: a zero-width tensor stands in, made only if the pipeline runs).
        Masks follow fairseq: ``key_padding_mask`` ``(B, Tk)`` True at padding, ``attn_mask``
        ``(Tq, Tk)`` bool (True = blocked) or additive float; the causal triangle of a decoder
        self-attention site comes from the site itself. ``state`` is this module's decoding
        dict (modifiers keep their per-hypothesis tensors there), ``query_offset`` each
        row's decoder step in cross-attention. Returns ``(out (B, H, Tq, d), probabilities
        (B, H, Tq, Tk) or None)``; the probabilities only with ``need_weights``."""
        with one_thread_if_small(problem_size(q, k, self.num_heads), q.device):
            if q.size(2) == 1 and self._method_alone(need_weights, attn_mask):
                out = self._step_shortcut(q, k, v, key_padding_mask, state, query_offset,
                                          key_group)  # fmt: skip
                if out is not None:
                    return self._linked(out, q, k), None
            ctx, problem = self._problem(
                query_input, q, k, v, key_padding_mask, attn_mask, state, query_offset,
                key_group, fold=True,
            )  # fmt: skip
            out, probs = self._attend(ctx, problem, need_weights)
            for modifier in self._uses("output_term"):
                term = modifier.output_term(ctx, out)
                if term is not None:
                    out = out + apply_head_selection(modifier, term, 0.0)
        if self.recording:
            self.last_record = ctx.record
        return self._linked(out, q, k), probs

    def _linked(self, out: Tensor, q: Tensor, k: Tensor) -> Tensor:
        """``out``, with q, k and the modifiers' parameters linked to it by zero gradients
        where a modifier discards the logits in distributed training (DDP would otherwise
        stop at their missing gradients: :mod:`localnmt.attention.unused`)."""
        if not (self.training and self._discards_logits() and distributed_training()):
            return out
        return keep_in_graph(out, [q, k, *(p for m in self.modifiers for p in m.parameters())])

    def _problem(
        self,
        query_input: Tensor | None,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        key_padding_mask: Tensor | None,
        attn_mask: Tensor | None,
        state: dict | None,
        query_offset: Tensor | None,
        key_group: int,
        fold: bool = False,
    ) -> tuple[AttentionContext, AttentionProblem]:
        """The call's context (transforms applied) and kernel problem (the caller sets the
        thread count: :func:`one_thread_if_small`); with ``fold``, the
        methods' key and value terms (:meth:`AttentionModifier.key_value_terms`) added to the
        problem's keys and values."""
        if key_padding_mask is not None and key_padding_mask.dim() == 0:
            key_padding_mask = None
        if query_input is None:  # read by no method of this layer
            query_input = q.new_zeros(q.size(2), q.size(0), 0)
        if self.add_zero_attn:
            k, v, key_padding_mask, attn_mask = self._zero_attn(k, v, key_padding_mask, attn_mask)
        ctx = self._context(query_input, q, k, v, key_padding_mask, state, query_offset)
        ctx.key_group = key_group
        for modifier in self._uses("transform"):
            modifier.transform(ctx)
        terms = [t for m in self._uses("key_value_terms") if fold
                 for t in [m.key_value_terms(ctx)] if t is not None]  # fmt: skip
        problem = build_problem(
            ctx, self.modifiers, key_padding_mask, attn_mask, self._dropout_p(), self.site.causal
        )
        for key_term, value_term in terms:
            problem.k = problem.k + key_term.to(problem.k.dtype)
            problem.v = problem.v + value_term.to(problem.v.dtype)
        return ctx, problem

    def _logits_and_values(
        self,
        query: Tensor,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        key_padding_mask: Tensor | None,
        attn_mask: Tensor | None,
        buffer: DecodingBuffer | None,
        query_offset: Tensor | None,
        key_group: int,
    ) -> tuple[Tensor, Tensor]:
        """fairseq's ``before_softmax``: the logits ``(B·H, Tq, Tk)`` and values."""
        state = None if buffer is None else buffer.entries
        with one_thread_if_small(problem_size(q, k, self.num_heads), q.device):
            ctx, problem = self._problem(
                query, q, k, v, key_padding_mask, attn_mask, state, query_offset, key_group
            )
        note_reference(problem, "before_softmax: logits requested")
        # blocked keys at the output dtype's most negative finite value, not −inf
        # (float16 cannot hold MASK_VALUE): a row without keys stays NaN-free
        logits = dense_logits(problem).clamp(min=torch.finfo(query.dtype).min)
        values = ctx.v.repeat_interleave(key_group, dim=0) if key_group > 1 else ctx.v
        return logits.view(-1, *logits.shape[2:]).type_as(query), values.reshape(
            -1, *values.shape[2:]
        )

    def _attend(
        self, ctx: AttentionContext, problem: AttentionProblem, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """``(out (B, H, Tq, d), probs or None)``: the dense path where probabilities are
        needed (weights, post-softmax modifiers, value terms, recording), else a kernel."""
        post_mods = self._uses("post")
        value_mods = [m for m in self._uses("value_term") if m.value_term_needed(ctx)]
        if (problem.relative is not None and not post_mods and problem.dropout_p == 0.0
                and len(value_mods) == 1
                and value_mods[0].relative_terms(ctx) is problem.relative):  # fmt: skip
            # relative positions' bias and value term are the problem's: kernels may take them
            # (with attention dropout the dense path runs the layer's own dropout module)
            problem.relative_values, value_mods = True, []
        if not (need_weights or value_mods or self.recording):
            if not post_mods:
                return fast_attention(problem), None
            affine = affine_post(ctx, problem, post_mods)
            if affine is not None:
                return attend_affine(problem, affine), None
            fused = fused_output(ctx, problem, post_mods)
            if fused is not None:
                if ctx.state is not None and self._method_alone(need_weights, None):
                    step_plan.keep(ctx.state, post_mods[0].step_plan(ctx, problem))
                return fused, None
        note_reference(problem, self._why_dense(need_weights, post_mods, value_mods))
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
            ctx.record.keep_dense(logits, probs)
        return out, probs

    def _method_alone(self, need_weights: bool, attn_mask: Tensor | None) -> bool:
        """Whether this call's one method alone decides its output, as the decoding-step
        shortcuts need (:meth:`_step_shortcut`): one method, and no weights, record, dropout,
        attention mask or fairseq's extra keys."""
        return (
            not (need_weights or self.recording)
            and attn_mask is None
            and self._one_method() is not None
            and self.bias_k is None
            and not self.add_zero_attn
            and self._dropout_p() == 0.0
        )

    def _step_shortcut(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        key_padding_mask: Tensor | None,
        state: dict | None,
        query_offset: Tensor | None,
        key_group: int,
    ) -> Tensor | None:
        """A one-query call's output without building its context and problem, where its one
        method offers it (:meth:`_method_alone`), else None: in cross-attention, the plan
        kept from an earlier step of the decoding run (:mod:`localnmt.attention.step_plan`);
        in self-attention without padding, the method's key and value terms added to the
        keys and values before the kernels (relative positions:
        :meth:`AttentionModifier.step_key_value_terms`), as the pipeline's fold does."""
        if not step_plan.ENABLED:
            return None
        if self.encoder_decoder_attention:
            if state is None:
                return None
            return step_plan.run_kept(state, q, k, v, key_padding_mask, query_offset, key_group)
        if key_padding_mask is not None or key_group != 1:
            return None
        method = self._one_method()
        assert method is not None  # the caller asked _method_alone
        terms = method.step_key_value_terms(k.size(2), k.device, state is not None)
        if terms is None:
            return None
        key_term, value_term = terms
        if key_term.dtype != k.dtype or value_term.dtype != v.dtype:
            key_term, value_term = key_term.to(k.dtype), value_term.to(v.dtype)
        return _plain_step(self, q, k + key_term, v + value_term)

    def _why_dense(
        self,
        need_weights: bool,
        post_mods: list[AttentionModifier],
        value_mods: list[AttentionModifier],
    ) -> str:
        """Why the dense reference runs, for traces: what needs the probabilities."""
        if need_weights:
            return "weights requested"
        if self.recording:
            return "recording"
        if value_mods:
            return f"value term of {value_mods[0].name}"
        return f"post stage of {post_mods[0].name} is not affine here"

    @staticmethod
    def _post(ctx: AttentionContext, probs: Tensor, modifiers: list[AttentionModifier]) -> Tensor:
        if ctx.record is not None:
            ctx.record.keep_before_post(probs)
        for modifier in modifiers:
            probs = apply_head_selection(modifier, modifier.post(ctx, probs), probs)
        return probs

    def _zero_attn(
        self, k: Tensor, v: Tensor, key_padding_mask: Tensor | None, attn_mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """fairseq's ``add_zero_attn``: one zero key and value after the others."""
        zeros = k.new_zeros(k.size(0), k.size(1), 1, k.size(3))
        k, v = torch.cat([k, zeros], dim=2), torch.cat([v, zeros], dim=2)
        return (k, v, *pad_masks_by_one(key_padding_mask, attn_mask))

    def _context(
        self,
        query: Tensor,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        key_padding_mask: Tensor | None,
        saved: dict | None,
        query_offset: Tensor | None,
    ) -> AttentionContext:
        positions = positions_of_call(
            self_attention=self.self_attention,
            cross_attention=self.encoder_decoder_attention,
            causal=self.site.causal,
            key_padding_mask=key_padding_mask,
            bsz=q.size(0),
            tq=q.size(2),
            tk=k.size(2),
            device=q.device,
            buffer=saved,
            query_offset=query_offset,
        )
        return AttentionContext(
            site=self.site,
            query_input=query,
            q=q,
            k=k,
            v=v,
            key_padding_mask=key_padding_mask,
            positions_fn=positions,
            state=saved,
            record=AttentionRecord() if self.recording else None,
        )

    # ---- incremental state ------------------------------------------------------------------
    @torch.jit.unused
    def reorder_incremental_state(
        self, incremental_state: IncrementalState, new_order: Tensor
    ) -> IncrementalState:
        """Reorder every cached tensor by hypothesis, modifiers' state included (fairseq's own
        version skips cross-attention buffers whose batch size already matches)."""
        entries = self._get_input_buffer(incremental_state)
        if entries:
            reorder_buffer(entries, new_order, self.encoder_decoder_attention,
                           self._shares_source())  # fmt: skip
            incremental_state = self._set_input_buffer(incremental_state, entries)
        return incremental_state


def problem_size(q: Tensor, k: Tensor, heads: int) -> int:
    """Scores in one call's attention map (``B·H·Tq·Tk``), for the thread heuristic."""
    return q.size(0) * heads * q.size(2) * k.size(2)
