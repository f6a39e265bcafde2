"""Decoding-step plans: a cross-attention layer's decoding step, kept to run again.

Within one decoding run the cross-attention steps of a layer differ only in their queries and
their decoder step: the source's keys, values and padding, the positions and lengths derived
from them and the method's parameters stay the same. Where a method's step goes to its own
kernels (:meth:`~localnmt.attention.modifier.AttentionModifier.fused_output`: the hard-coded
Gaussian, GMM), the method also hands the pipeline a :class:`StepPlan`
(:meth:`~localnmt.attention.modifier.AttentionModifier.step_plan`): that step's problem with
the queries and query positions left open. The pipeline keeps it in the layer's decoding
state, and each later step it fits runs it on its own queries: the same registry, kernel and
numbers, without building the call's context and kernel problem again (docs/design.md,
"Decoding-step plans").

A plan runs only where it fits the step exactly (:func:`run_kept`): the very same key and
value tensors, not written to since; equal padding; the same query shape, dtype and source
grouping; no weights asked, nothing recorded, no dropout, no attention mask, no kernel forced.
Anything else runs the pipeline, which may keep a new plan. Beam search's reorder keeps a
plan where each hypothesis's source row stays within its sentence (:meth:`StepPlan.reordered`).
Kernel traces see the plan's calls as the pipeline's: the plan runs the same registry. Where
nothing traces, a method's plan may run its kernel prepared at the plan's first step
(:meth:`~localnmt.attention.dispatch.KernelRegistry.prepared`: GMM's C step), which checks
only the step's own tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from localnmt.attention import dispatch
from localnmt.attention.shared_source import source_group

if TYPE_CHECKING:
    from localnmt.attention.problem import AttentionProblem

#: Switch for tests and benchmarks (False: every one-query call runs the whole pipeline, no
#: plan and no self-attention shortcut: ``LocalAttention._step_shortcut``).
ENABLED = True
#: The key of a layer's plan in its decoding state (beam search's reorder asks the plan itself).
PLAN_KEY = "step_plan"

#: ``(q (B, H, 1, d) pre-scaled, k, v (B / key_group, H, Tk, d), query positions (B, 1)
#: float32) -> out (B, H, 1, d)``; the plan hands it its current source (after beam search
#: moved it, the new tensors), so that a run keeps no other source alive.
StepRun = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


@dataclass
class StepPlan:
    """One decoding step of a cross-attention layer with the queries left open: ``run`` on the
    step's queries and query positions gives the layer's attention output, as the pipeline
    would; ``k``, ``v`` and ``padding`` are the source it was made for."""

    run: StepRun
    k: Tensor
    v: Tensor
    padding: Tensor | None
    key_group: int
    query_shape: torch.Size
    dtype: torch.dtype
    versions: tuple[int, int] | None = field(init=False)
    #: beam search moved each source row within its group of equal rows since the last step:
    #: the keys and values it moves are this plan's, in new tensors (:meth:`reordered`)
    moved: bool = field(default=False, init=False)
    _group: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.versions = _versions(self.k, self.v)

    @classmethod
    def of(cls, problem: AttentionProblem, run: StepRun) -> StepPlan:
        """The plan of a step whose kernel problem was ``problem``, run by ``run``."""
        return cls(run, problem.k, problem.v, problem.padding_source, problem.key_group,
                   problem.q.shape, problem.q.dtype)  # fmt: skip

    def fits(self, q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None,
             key_group: int) -> bool:  # fmt: skip
        """Whether this step has the plan's source (the same unwritten tensors, or the ones
        beam search moved them to: :meth:`reordered`; equal padding) and queries of its
        shape, dtype and grouping."""
        if key_group != self.key_group:
            return False
        if k is not self.k or v is not self.v:
            if not (self.moved and _alike(k, self.k) and _alike(v, self.v)):
                return False
            self.k, self.v, self.versions = k, v, _versions(k, v)  # the moved source
        self.moved = False
        if q.shape != self.query_shape or q.dtype != self.dtype or q.device != k.device:
            return False
        if self.versions is None or _versions(k, v) != self.versions:
            return False
        if padding is None or self.padding is None:
            return padding is None and self.padding is None
        return padding is self.padding or (
            padding.shape == self.padding.shape and torch.equal(padding, self.padding)
        )

    def reordered(self, new_order: Tensor) -> bool:
        """Beam search reorders the hypotheses by ``new_order`` (each row's source row): whether
        the plan still holds. It does where the stored rows stay (one row per group of
        hypotheses, fairseq's shared source) or where each row is taken from its own group of
        equal source rows (the hypotheses of one sentence: :func:`source_group`, found once
        per plan), so that the moved keys and values equal these, whichever new tensors hold
        them; not where the batch changes size or rows cross groups."""
        rows = self.k.size(0)
        if self.key_group > 1:  # stored once per group: moved only when the batch changes
            return new_order.numel() == rows * self.key_group
        if new_order.numel() != rows or _versions(self.k, self.v) != self.versions:
            return False
        if self._group is None:
            flat = [t.reshape(rows, -1).t().unsqueeze(-1) for t in (self.k, self.v)]
            self._group = source_group(flat[0], flat[1], self.padding)
        own = torch.arange(rows, device=new_order.device) // self._group
        if not torch.equal(torch.div(new_order, self._group, rounding_mode="floor"), own):
            return False
        self.moved = True
        return True


def _alike(new: Tensor, old: Tensor) -> bool:
    return new.shape == old.shape and new.dtype == old.dtype and new.device == old.device


def _versions(k: Tensor, v: Tensor) -> tuple[int, int] | None:
    """The tensors' version counters (None for inference tensors, which keep none: no plan)."""
    try:
        return k._version, v._version
    except RuntimeError:
        return None


def keep(state: dict, plan: StepPlan | None) -> None:
    """Keep ``plan`` for the next steps of this decoding run (None, or plans switched off:
    forget the last one). A plan for the last plan's source, or for the tensors beam search
    moved it to, takes over its group of equal rows (found once per decoding run)."""
    last = state.pop(PLAN_KEY, None)
    if plan is None or not ENABLED or plan.versions is None or plan.query_shape[2] != 1:
        return  # plans are for one-query steps of tensors with versions
    if last is not None and last._group is not None and last.key_group == plan.key_group:
        if last.k is plan.k or (last.moved and _alike(plan.k, last.k)):
            plan._group = last._group
    state[PLAN_KEY] = plan


def run_kept(state: dict, q: Tensor, k: Tensor, v: Tensor, padding: Tensor | None,
             query_offset: Tensor | None, key_group: int) -> Tensor | None:  # fmt: skip
    """The step's output from the plan kept in ``state``, where one fits (the caller has
    checked the layer: no weights, record, dropout or attention mask); else None."""
    plan = state.get(PLAN_KEY)
    if plan is None or dispatch.forced_name() is not None:
        return None
    if not plan.fits(q, k, v, padding, key_group):
        return None
    if query_offset is None:  # the first step: positions start at 0
        positions = torch.zeros(q.size(0), 1, device=q.device)
    elif query_offset.dtype == torch.float32:
        positions = query_offset[:, None]  # the query positions of a one-query call
    else:  # the pipeline's positions would take the offset's dtype: let it run
        return None
    return plan.run(q, plan.k, plan.v, positions)
