"""Hard-coded Gaussian cross-attention (You et al. 2020), the "Hard-Code Gaussian" row of
Zhang & Feng 2021, Table 2: a fixed Gaussian replaces dot-product cross-attention.

Target token ``i`` attends to source position ``j`` (0-based, from the first real token) with::

    p_ij = softmax_j(−(j − μ_i)² / (2σ²)),   μ_i = min(ratio · i, J − 1)

over the real source keys. Choices (the paper only says "fixed mean and variance"): the mean
follows the diagonal scaled by ``ratio`` (source/target length ratio of the training data, 1.0
by default; You et al. centre cross-attention on the source position matching the target
position), clamped to the last real source token so that long outputs keep a peaked
distribution; σ = ``std`` = 1, the standard deviation You et al. use for every hard-coded
head; normalised exactly over the real keys (a softmax), as an attention distribution must be.
No parameters; the projections q/k stay in the model but receive no gradient (an exact zero
one in distributed training: :mod:`localnmt.attention.unused`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from localnmt.attention.context import AffinePost, AttentionContext, AttentionSite
from localnmt.attention.fixed_gaussian import (
    FixedGaussianProblem,
    fixed_gaussian_output,
    fixed_means,
    fixed_probabilities,
)
from localnmt.attention.modifier import AttentionModifier, SpecError, option, register_modifier
from localnmt.attention.problem import AttentionProblem
from localnmt.attention.record import tensor_field
from localnmt.attention.step_plan import StepPlan


@dataclass
class HardcodedGaussianRecord:
    """The fixed means of a recorded hard-coded Gaussian layer."""

    mu: Tensor = tensor_field("bq", "μ_i = min(ratio·i, J−1)")


@register_modifier
class HardcodedGaussian(AttentionModifier):
    """A fixed, input-agnostic Gaussian replaces the dot-product distribution."""

    name = "hardcoded_gaussian"
    sites = ("cross",)
    reads_keys = False  # positions and lengths only
    discards_logits = True  # the fixed distribution replaces softmax(q·k)

    @dataclass
    class Options:
        ratio: float = option(1.0, "source/target length ratio: mean μ_i = ratio · i")
        std: float = option(1.0, "standard deviation σ of the Gaussian")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        if options.std <= 0 or options.ratio < 0:
            raise SpecError("method 'hardcoded_gaussian' needs std > 0 and ratio >= 0")

    def post(self, ctx: AttentionContext, probs: Tensor) -> Tensor:
        return self._fixed(ctx).expand_as(probs)

    def post_affine(self, ctx: AttentionContext) -> AffinePost | None:
        """The fixed distribution as ``p ↦ 0·p + p_fixed``: no dot-product attention is
        computed where nothing needs it (``p_fixed @ V`` only). Not in incremental decoding,
        whose step has its own kernels (:meth:`fused_output`)."""
        if ctx.incremental:
            return None
        return AffinePost(0.0, self._fixed(ctx))

    def fused_output(self, ctx: AttentionContext, problem: AttentionProblem) -> Tensor | None:
        """A decoding step's ``p_fixed @ V`` through the ``fixed gaussian`` kernels (one C
        call where built; the torch ops of :meth:`post_affine` otherwise), no dot product."""
        if not ctx.incremental or ctx.recording:
            return None
        return fixed_gaussian_output(
            self._step_problem(problem.v, problem.key_group, self._source(ctx), ctx.query_positions)
        )

    def step_plan(self, ctx: AttentionContext, problem: AttentionProblem) -> StepPlan | None:
        """The step of :meth:`fused_output` with the query positions left open (nothing
        else of it depends on the step but the values, which the plan hands over)."""
        if not ctx.incremental or ctx.recording:
            return None
        group, source = problem.key_group, self._source(ctx)

        def run(q: Tensor, k: Tensor, v: Tensor, query_positions: Tensor) -> Tensor:
            return fixed_gaussian_output(self._step_problem(v, group, source, query_positions))

        return StepPlan.of(problem, run)

    @staticmethod
    def _source(ctx: AttentionContext) -> tuple[Tensor, Tensor, Tensor | None]:
        """What a decoding step reads of the source: key positions ``(B, Tk)``, real lengths
        ``(B, Tq)`` and padding ``(B, Tk)`` or None."""
        return ctx.key_positions, ctx.key_lengths, ctx.key_padding_mask

    def _step_problem(self, v: Tensor, key_group: int, source: tuple[Tensor, Tensor, Tensor | None],
                      query_positions: Tensor) -> FixedGaussianProblem:  # fmt: skip
        """``p_fixed @ V`` of a decoding step as the ``fixed gaussian`` kernels take it."""
        positions, lengths, padding = source
        return FixedGaussianProblem(v, key_group, positions, query_positions, lengths, padding,
                                    self.options.ratio, self.options.std)  # fmt: skip

    def _fixed(self, ctx: AttentionContext) -> Tensor:
        """``p_ij`` of the module docstring, float32 ``(B, 1, Tq, Tk)``."""
        mu = fixed_means(ctx.query_positions, ctx.key_lengths, self.options.ratio)
        if ctx.recording:
            ctx.keep(HardcodedGaussianRecord(mu=mu))
        return fixed_probabilities(mu, ctx.key_positions, ctx.key_padding_mask, self.options.std)
