"""Gaussian mixture cross-attention (Zhang & Feng 2021, "Concentrated Cross-Attention").

A post-softmax modifier of cross-attention. For target token ``i`` and each head, FFNs on the
head's query projection ``Q(s_i)`` (shared across heads, eq. 7-9, 14) predict ``K`` components;
the Gaussian mixture attention (eq. 6)::

    β_ij = Σ_k ω_ik / Z_ik · exp(−(j − μ_ik)² / (2σ_ik²))

is fused with the dot-product attention α (the pipeline's softmax) by a gate (eq. 13)::

    γ_ij = (1 − g_i) · α_ij + g_i · β_ij

Conversions (Table 1), option ``variant``:

- ``approx`` (Our Method): ω = softmax(ω̂) (eq. 10), μ = J·sigmoid(μ̂) (eq. 11),
  σ = min(J/6·sigmoid(σ̂), μ/3, (J−μ)/3) (eq. 12), Z = √(2πσ²).
- ``norm`` (Our Method+Norm.): as ``approx`` but σ = J·sigmoid(σ̂) and β divided by its sum
  over the source (strict normalisation).
- ``synthesis`` (Synthesis Network, Graves 2013): Z = 1, ω = exp(ω̂),
  μ_i = μ_{i−1} + exp(μ̂_i) (μ_0 = 0, kept as decoder state), σ = √(exp(−σ̂)/2).

``J`` is the real source length and ``j`` the source position counted from the first real
token (any padding side), taken at the centre of its unit cell: ``j = position + 0.5`` (option
``offset``). The paper's μ ∈ (0, J) and its 3σ interval inside [0, J] (eq. 12) then cover
exactly the J tokens at both ends; with offset 0 (0-based) or 1 (1-based) a component
centred near one end falls off the sentence. σ is floored at ``sigma_min`` (default 0.5) in
``approx``/``norm``: eq. 12 reaches 0 at μ → 0 or μ → J, where the density sampled at the
positions spikes without bound; at σ ≥ 0.5 the sampled density sums to 1 ± 1.5 % (Poisson
summation), which is the paper's "approximate normalisation".

Ablations: ``share`` (Table 3) makes all components share the mean / variance / weight
(ω = 1/K); ``fusion`` (Table 4): ``gate`` (eq. 14), ``average`` (g = 0.5) or ``gmm``
(γ = β, Gaussian mixture only). K = 1 has no ω predictor (ω ≡ 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from localnmt.attention.context import AffinePost, AttentionContext, AttentionSite
from localnmt.attention.deferred import Deferred
from localnmt.attention.fast.autograd.predictor_gemms import BankShape, bank_outputs
from localnmt.attention.mixture import (  # noqa: F401  (EXP_FLOOR, MixtureSum: re-exported)
    EXP_FLOOR,
    STEP_REGISTRY,
    MixtureParams,
    MixtureProblem,
    MixtureStepProblem,
    MixtureSum,
    PredictorLayout,
    StepWeights,
    combine,
    gated_mixture,
    gmm_step_output,
    mixture_attention,
)
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    check_positions,
    option,
    register_modifier,
)
from localnmt.attention.problem import AttentionProblem
from localnmt.attention.record import tensor_field
from localnmt.attention.step_plan import StepPlan

#: Upper clamp of the arguments of exp() in the synthesis network (e^8 ≈ 2981), so that the
#: unnormalised mixture stays finite in fp16.
EXP_CLAMP = 8.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


#: Whether eq. 13 runs on the CPU as ``(1 − g)·(α @ V) + (g·β) @ V`` with ``α @ V`` from a
#: fused kernel (:meth:`GaussianMixture.affine_post`) where a call needs no probabilities. Off
#: (default): the dense path forms α and γ and runs ``γ @ V``, which measured as fast at base
#: size and faster at the quickstart's (bench/README.md, "GMM cross-attention in training").
#: Other devices keep the fused kernel (no α in memory). A switch for tests and benchmarks.
AFFINE_ON_CPU = False

#: :meth:`GaussianMixture.source`: key positions j, real keys, blocked keys, J
Sources = tuple[Tensor, Tensor | None, Tensor | None, Tensor]


class PredictorBank(nn.Module):
    """Several ``V^T tanh(W^T Q(s_i) + b1) + b2`` (eq. 7-9 and the inside of eq. 14) at once.

    Each named predictor has its own ``W`` (d×d), ``b1``, ``V`` (d×out) and ``b2``; they are
    stored stacked so that one call runs two matrix products for all of them (the hidden
    layers side by side, the output layers as one block-diagonal product) instead of two per
    predictor: a decoding step of GMM cross-attention is bound by the number of small ops.
    """

    def __init__(self, dim: int, outs: dict[str, int]):
        super().__init__()
        self.names = tuple(outs)
        self.outs = tuple(outs.values())
        n, total = len(self.outs), sum(self.outs)
        self.hidden_weight = nn.Parameter(torch.empty(n * dim, dim))
        self.hidden_bias = nn.Parameter(torch.empty(n * dim))
        self.out_weight = nn.Parameter(torch.empty(total, dim))
        self.out_bias = nn.Parameter(torch.empty(total))
        self.bank_shape = BankShape(dim, self.outs)
        self._cache: tuple[float, tuple[Tensor, Tensor, Tensor, Tensor]] | None = None
        self._step: tuple[Tensor, StepWeights] | None = None  # keyed by the folded W it came from
        bound = 1 / math.sqrt(dim)  # nn.Linear's default: U(±1/√fan_in), fan_in = d for both
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def weights(self, name: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``W`` (d, d), ``b1`` (d,), ``V^T`` (out, d), ``b2`` (out,) of one predictor."""
        i = self.names.index(name)
        dim = self.hidden_weight.size(1)
        start = sum(self.outs[:i])
        rows, cols = slice(i * dim, (i + 1) * dim), slice(start, start + self.outs[i])
        return (self.hidden_weight[rows], self.hidden_bias[rows], self.out_weight[cols],
                self.out_bias[cols])  # fmt: skip

    def forward(self, q: Tensor, scale: float = 1.0) -> dict[str, Tensor]:
        """The raw outputs ``V^T tanh(W^T (scale·q) + b1) + b2`` of every predictor."""
        return self.split(self.outputs(q, scale))

    def outputs(self, q: Tensor, scale: float = 1.0, reuse: bool = False) -> Tensor:
        """All raw outputs side by side, ``(…, Σ out)`` (and zero columns of padding after
        them, :meth:`BankShape.width`); ``reuse``: see :meth:`_folded`. In training, one
        autograd Function with its own backward (``fast/autograd/predictor_gemms.py``)."""
        if torch.is_grad_enabled():
            weights = (self.hidden_weight, self.hidden_bias, self.out_weight, self.out_bias)
            return bank_outputs(q, weights, self.bank_shape, scale)
        w1, b1, w2, b2 = self._folded(scale, reuse)
        # on rows: F.linear on a (B, H, Tq, d) view of transformers' (B, Tq, H·d) projection
        # cannot flatten it and runs one small GEMM per (sentence, head) instead of one
        rows = q.reshape(-1, q.size(-1))
        return F.linear(F.linear(rows, w1, b1).sigmoid_(), w2, b2).view(*q.shape[:-1], w2.size(0))

    def split(self, outputs: Tensor) -> dict[str, Tensor]:
        """:meth:`outputs` (or a function of it, element by element) by predictor name."""
        return dict(zip(self.names, outputs[..., : sum(self.outs)].split(self.outs, dim=-1)))

    def forget(self) -> None:
        """Drop the folded weights kept by :meth:`_folded` (a new decoding run starts)."""
        self._cache = self._step = None

    def step_weights(self, scale: float) -> StepWeights | None:
        """The folded weights of a decoding run (:meth:`_folded` with ``reuse``) laid out as
        the C decoding step reads them (``csrc/gmm_predict.h``); None where autograd records."""
        if torch.is_grad_enabled():
            return None
        w1, b1, w2, b2 = self._folded(scale, reuse=True)
        if self._step is None or self._step[0] is not w1:
            weights = StepWeights(w1.t().contiguous(), b1.contiguous(), w2.contiguous(),
                                  b2.contiguous())  # fmt: skip
            self._step = (w1, weights)
        return self._step[1]

    def _folded(self, scale: float, reuse: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The folded weights (:meth:`BankShape.folded`) for a forward without autograd.

        ``reuse`` (the steps of one decoding run): the folded weights of the previous
        ``reuse`` call are returned until :meth:`forget`, which the modifier calls at every
        new source batch; so weights written in between (even through ``.data``, which no
        version counter sees) are read again at the next run."""
        if reuse and self._cache is not None and self._cache[0] == scale:
            return self._cache[1]
        weights = (self.hidden_weight, self.hidden_bias, self.out_weight, self.out_bias)
        folded = self.bank_shape.folded(weights, scale)
        self._cache = (scale, folded) if reuse else None
        return folded


@register_modifier
class GaussianMixture(AttentionModifier):
    """Gaussian mixture attention fused with dot-product cross-attention (eq. 6-15)."""

    name = "gmm"
    sites = ("cross",)
    reads_keys = False  # positions and lengths only

    @property
    def discards_logits(self) -> bool:
        """``fusion=gmm`` (γ = β, Table 4) leaves α, and so the keys, out of the output."""
        return self.options.fusion == "gmm"

    @dataclass
    class Options:
        k: int = option(4, "number of Gaussian components K")
        variant: str = option(
            "approx",
            "approx: eq. 10-12 (Our Method); norm: strict normalisation (Our Method+Norm.); "
            "synthesis: Graves 2013 (Table 1)",
            choices=("approx", "norm", "synthesis"),
        )
        fusion: str = option(
            "gate",
            "gate: learned gate eq. 14; average: g = 0.5; gmm: Gaussian mixture only",
            choices=("gate", "average", "gmm"),
        )
        share: str = option(
            "none",
            "share one mean / variance / weight across components (Table 3)",
            choices=("none", "mean", "variance", "weight"),
        )
        sigma_min: float = option(0.5, "floor of σ in approx / norm (guard σ > 0)")
        offset: float = option(0.5, "j = 0-based position + offset (0.5: cell centres)")

    @classmethod
    def validate(cls, options: Options, site: AttentionSite) -> None:
        super().validate(options, site)
        if options.k < 1:
            raise SpecError(f"option 'k' of method 'gmm' must be >= 1, got {options.k}")
        if options.sigma_min <= 0:
            raise SpecError("option 'sigma_min' of method 'gmm' must be > 0")
        check_positions(
            cls.name, "k", options.k, site, cls.Options.k
        )  # more components than positions

    @classmethod
    def memory_bytes(cls, options: Options, site: AttentionSite, pairs: int) -> int:
        """At least one float32 per component, head and (sentence, query, key) triple: the
        mixture's densities (eq. 11-12) before they are summed over components (measured for
        one layer's forward and backward: 1.4-6.7 bytes per such element in ``approx`` and
        ``synthesis``, 9.7-11 in ``norm``)."""
        return 4 * options.k * site.num_heads * pairs

    def __init__(self, options: Options, site: AttentionSite, heads: list[int] | None = None):
        super().__init__(options, site, heads)
        dim, k = site.head_dim, options.k
        outs = {
            "mu": 1 if options.share == "mean" else k,
            "sigma": 1 if options.share == "variance" else k,
        }
        if options.share != "weight" and k > 1:  # else ω ≡ 1/K, nothing to predict
            outs["omega"] = k
        if options.fusion == "gate":
            outs["gate"] = 1
        self.predictors = PredictorBank(dim, outs)
        self._step_layout = (  # the C kernels (fast/gmm_mixture.py) cover eq. 10-12 of approx
            PredictorLayout.of(self.predictors.names, self.predictors.outs, k, options.fusion,
                               options.sigma_min)
            if options.variant == "approx"
            else None
        )  # fmt: skip

    # ---- eq. 7-12 and Table 1 -------------------------------------------------------------
    def mixture_params(
        self,
        ctx: AttentionContext | None,
        raw: dict[str, Tensor],
        length: Tensor | None = None,
        squashed: dict[str, Tensor] | None = None,
    ) -> MixtureParams:
        """Convert the FFN outputs ``raw`` (eq. 7-9, ``(B, H, Tq, ·)``) into the mixture;
        ``length``: J as ``(B, 1, Tq or 1, 1)`` float32 (default: from ``ctx``);
        ``squashed``: ``sigmoid(raw)`` by name where the caller took it in one op."""
        opts = self.options
        k = opts.k
        shape = (*raw["mu"].shape[:-1], k)
        if opts.variant == "synthesis":  # Z = 1, ω = exp(ω̂), σ = sqrt(exp(−σ̂)/2)
            mu_hat = raw["mu"].float().expand(shape)
            log_omega = (
                mu_hat.new_zeros(()).expand(shape)
                if "omega" not in raw
                else raw["omega"].float().clamp(max=EXP_CLAMP)
            )
            assert ctx is not None, "the synthesis network's means follow the call's state"
            mu = self._cumulative_mean(ctx, mu_hat.clamp(max=EXP_CLAMP).exp())
            sigma_hat = raw["sigma"].float().expand(shape)
            sigma = torch.exp(sigma_hat.clamp(max=EXP_CLAMP) * -0.5) * math.sqrt(0.5)
            return MixtureParams(log_omega, mu, sigma, log_omega)
        if squashed is None:
            squashed = {name: torch.sigmoid(raw[name].float()) for name in ("mu", "sigma")}
        if "omega" in raw:
            log_omega = torch.log_softmax(raw["omega"].float(), dim=-1)  # eq. 10
        else:
            log_omega = raw["mu"].new_full((), -math.log(k), dtype=torch.float32).expand(shape)
        if length is None:
            assert ctx is not None, "J comes from the call's context where it is not given"
            length = ctx.key_lengths[:, None, :, None].float()  # J, (B, 1, Tq, 1)
        mu = length * squashed["mu"].expand(shape)  # eq. 11
        if opts.variant == "norm":
            sigma = length * squashed["sigma"].expand(shape)
        else:  # eq. 12: min(J/6·sigmoid(σ̂), μ/3, (J−μ)/3) = min(J/2·sigmoid(σ̂), μ, J−μ) / 3
            nearer_end = torch.minimum(mu, length - mu)
            sigma = torch.minimum((0.5 * length) * squashed["sigma"], nearer_end) / 3
        sigma = sigma.clamp(min=opts.sigma_min)
        log_scale = log_omega - (torch.log(sigma) + _HALF_LOG_2PI)  # log ω − log Z
        return MixtureParams(log_scale, mu, sigma, log_omega)

    def _cumulative_mean(self, ctx: AttentionContext, steps: Tensor) -> Tensor:
        """μ_i = μ_{i−1} + exp(μ̂_i) along the target axis, continued across decoding steps."""
        mu = steps.cumsum(dim=2)
        prev = self.get_state(ctx, "mu")
        if prev is not None:
            mu = mu + prev.unsqueeze(2)
        self.set_state(ctx, "mu", mu[:, :, -1])
        return mu

    # ---- eq. 13-15 --------------------------------------------------------------------------
    def source(self, ctx: AttentionContext) -> Sources:
        """What depends on the source only: j of each key ``(B, Tk)`` (position + offset),
        the real keys ``(B, Tk)`` and their complement ``(B, 1, 1, Tk)`` (None without
        padding), and J ``(B, 1, Tq or 1, 1)``. Computed once per sentence in decoding."""
        cached = self.get_source_state(ctx, "j")
        if cached is not None and cached.shape == (ctx.batch_size, ctx.k.size(2)):
            names = ("real", "blocked", "length")
            real, blocked, length = (self.get_source_state(ctx, n) for n in names)
            assert length is not None
            return cached, real, blocked, length
        if ctx.incremental:  # a new source batch: a new decoding run
            self.predictors.forget()
        j = ctx.key_positions.float() + self.options.offset
        real = blocked = None
        if ctx.key_padding_mask is not None:
            blocked = ctx.key_padding_mask.bool()[:, None, None, :]
            real = ~ctx.key_padding_mask.bool()
        length = ctx.key_lengths[:, None, :, None].float()
        if ctx.incremental:  # cross-attention: the same J for every query
            length = length[:, :, :1]
            for name, value in (("j", j), ("real", real), ("blocked", blocked), ("length", length)):
                if value is not None:
                    self.set_state(ctx, name, value, source=True)
        return j, real, blocked, length

    # ---- eq. 13-15 --------------------------------------------------------------------------
    def _mixture_and_gate(
        self, ctx: AttentionContext | None, outputs: Tensor, length: Tensor
    ) -> tuple[MixtureParams, Tensor | float]:
        """The mixture (eq. 10-12) and the gate g of eq. 13 (eq. 14; 0.5 for ``average``, 1
        for ``gmm``) from the raw predictor outputs."""
        bank = self.predictors
        raw = bank.split(outputs)
        fusion = self.options.fusion
        squashed = None  # μ̂, σ̂ (approx / norm) and the gate go through one sigmoid
        if self.options.variant != "synthesis" or fusion == "gate":
            squashed = bank.split(torch.sigmoid(outputs.float()))
        params = self.mixture_params(ctx, raw, length, squashed)
        if fusion == "gate":
            assert squashed is not None
            return params, squashed["gate"]  # eq. 14, (B, H, Tq, 1)
        return params, 0.5 if fusion == "average" else 1.0

    def post_affine(self, ctx: AttentionContext) -> AffinePost | None:
        """:meth:`affine_post`, on the CPU only where :data:`AFFINE_ON_CPU` is on (else None:
        the dense path)."""
        if ctx.q.device.type == "cpu" and not AFFINE_ON_CPU:
            return None
        return self.affine_post(ctx)

    def affine_post(self, ctx: AttentionContext) -> AffinePost | None:
        """Eq. 13 as ``(1 − g)·α + g·β``: α @ V then comes from a fused kernel. Not in
        incremental decoding, whose step has its own kernels (:meth:`fused_output`): there a fused
        kernel plus ``(g·β) @ V`` did not beat forming α and γ (docs/huggingface.md)."""
        if ctx.incremental or ctx.recording:
            return None
        outputs = self._raw_outputs(ctx)
        shape = (*outputs.shape[:3], ctx.k.size(2))
        return AffinePost(self._keep(outputs), self._gamma(ctx, self.source(ctx), outputs, shape))

    def fused_output(self, ctx: AttentionContext, problem: AttentionProblem) -> Tensor | None:
        """A decoding step to the layer's output through the step kernels (``gmm step``: α,
        γ of eq. 13 and ``γ @ V`` in one C call for ``approx``; else the dense path with
        :meth:`post`'s numbers)."""
        if not ctx.incremental or ctx.recording:
            return None
        sources = self.source(ctx)  # first: a new source batch forgets the reused weights
        return gmm_step_output(self._step_problem(ctx, problem, sources, self._step_weights(ctx)))

    def step_plan(self, ctx: AttentionContext, problem: AttentionProblem) -> StepPlan | None:
        """The step of :meth:`fused_output` with the queries left open, for variant
        ``approx`` (its step reads nothing else that changes: the source's positions,
        lengths and padding are the plan's, the predictors' folded weights the decoding
        run's)."""
        if not ctx.incremental or ctx.recording or self.options.variant != "approx":
            return None
        sources, weights = self.source(ctx), self._step_weights(ctx)
        # the last step's problem, its positions left out (no band or bias reads them here):
        # each run replaces its tensors, so that it keeps no earlier source alive
        last = [replace(problem, positions=None)]
        # the step kernel, its checks of the source and the weights done once (not traced)
        prepared = STEP_REGISTRY.prepared(self._step_problem(None, last[0], sources, weights))

        def run(q: Tensor, k: Tensor, v: Tensor, query_positions: Tensor) -> Tensor:
            out = None if prepared is None else prepared(q, k, v)
            if out is not None:
                return out
            last[0] = step = replace(last[0], q=q, k=k, v=v)
            return gmm_step_output(self._step_problem(None, step, sources, weights))

        return StepPlan.of(problem, run)

    def _step_problem(
        self,
        ctx: AttentionContext | None,
        problem: AttentionProblem,
        sources: Sources,
        weights: StepWeights | None,
    ) -> MixtureStepProblem:
        """A decoding step on ``problem``'s queries: α from ``problem``, γ of eq. 13 from the
        predictors on the same queries (in the C step where ``weights`` are given). ``ctx``
        None: a kept plan's step (variant ``approx``, whose mixture reads nothing of the
        call's context once J is given)."""
        q = problem.q
        shape = (*q.shape[:3], problem.k.size(2))

        def raw_outputs() -> Tensor:
            return self.predictors.outputs(q, math.sqrt(q.size(-1)), reuse=True)

        if weights is None:
            outputs: Tensor | Deferred = raw_outputs()
        else:  # the C step computes them itself; built only if another kernel reads them
            width = self.predictors.bank_shape.width(q.device)
            outputs = Deferred(raw_outputs, (*q.shape[:3], width), torch.float32)
        mixture = self._mixture_problem(ctx, sources, outputs, shape, None, decoding_step=True)
        return MixtureStepProblem(problem, mixture, weights)

    def _step_weights(self, ctx: AttentionContext) -> StepWeights | None:
        """The predictors' weights for the C decoding step (eq. 7-9 and 14 inside the call), on
        float32 CPU queries of variant ``approx`` without autograd; else None."""
        q = ctx.q
        if self._step_layout is None or q.device.type != "cpu" or q.dtype != torch.float32:
            return None
        return self.predictors.step_weights(math.sqrt(q.size(-1)))

    def post(self, ctx: AttentionContext, probs: Tensor) -> Tensor:
        sources = self.source(ctx)  # first: a new source batch forgets the reused weights
        outputs = self._raw_outputs(ctx)
        return self._gamma(ctx, sources, outputs, probs.shape, probs)

    def _gamma(self, ctx: AttentionContext, sources: Sources, outputs: Tensor,
               shape: tuple[int, ...], probs: Tensor | None = None) -> Tensor:  # fmt: skip
        """Eq. 13 from the raw predictor outputs: ``γ = (1 − g)·α + g·β`` with α = ``probs``,
        or ``g·β`` alone where ``probs`` is None (:meth:`affine_post`'s added term): the
        registered kernels of :mod:`localnmt.attention.mixture` (C where they can), or torch
        ops where the call is recorded (the analyses read μ, σ, ω, g and β)."""
        positions, real, blocked, length = sources
        problem = self._mixture_problem(ctx, sources, outputs, shape, probs)
        if not ctx.recording:
            return gated_mixture(problem)
        assert probs is not None
        params, gate = problem.parameters()
        beta = mixture_attention(
            params, positions, real, normalise=problem.normalise, length=length, blocked=blocked
        )
        ctx.keep(
            GaussianMixtureRecord(
                alpha=probs,
                beta=beta,
                gate=gate.squeeze(-1)
                if isinstance(gate, Tensor)
                else probs.new_full(probs.shape[:3], gate),
                mu=params.mu,
                sigma=params.sigma,
                omega=params.omega,
            )
        )
        return combine(beta, gate, problem.alpha)

    def _raw_outputs(self, ctx: AttentionContext) -> Tensor:
        """The predictors' raw outputs (eq. 7-9, 14) on Q(s_i), the query before its 1/√d;
        a decoding run reuses its folded weights (:meth:`PredictorBank._folded`)."""
        scale = math.sqrt(ctx.q.size(-1))
        return self.predictors.outputs(ctx.q, scale, reuse=ctx.incremental)

    def _mixture_problem(
        self,
        ctx: AttentionContext | None,
        sources: Sources,
        outputs: Tensor | Deferred,
        shape: tuple[int, ...],
        probs: Tensor | None,
        decoding_step: bool | None = None,
    ) -> MixtureProblem:
        """The mixture kernels' problem of this call (γ of eq. 13, or g·β without ``probs``);
        ``decoding_step`` defaults to whether ``ctx`` is incremental (``ctx`` None: a kept
        plan's step, see :meth:`_step_problem`)."""
        positions, real, blocked, length = sources
        if decoding_step is None:
            assert ctx is not None
            decoding_step = ctx.incremental
        return MixtureProblem(
            site=self.site,
            outputs=outputs,
            shape=tuple(shape),
            positions=positions,
            real=real,
            blocked=blocked,
            length=length,
            parameters_fn=lambda raw: self._mixture_and_gate(ctx, raw, length),
            probs=probs,
            fusion=self.options.fusion,
            normalise=self.options.variant == "norm",
            layout=self._step_layout,
            decoding_step=decoding_step,
        )

    def _keep(self, outputs: Tensor) -> Tensor | float:
        """``1 − g`` of eq. 13 (eq. 14's gate from its raw output column)."""
        if self.options.fusion != "gate":
            return 0.5 if self.options.fusion == "average" else 0.0
        return 1.0 - torch.sigmoid(self.predictors.split(outputs)["gate"].float())


@dataclass
class GaussianMixtureRecord:
    """What a recorded ``gmm`` cross-attention computed (eq. 6-14)."""

    alpha: Tensor = tensor_field("bhqk", "α: the dot-product attention (pipeline softmax)")
    beta: Tensor = tensor_field("bhqk", "β: the Gaussian mixture attention, eq. 6")
    gate: Tensor = tensor_field("bhq", "g of eq. 13-14 (0.5 / 1 for fusion=average / gmm)")
    mu: Tensor = tensor_field("bhqc", "μ per component (source position + offset)")
    sigma: Tensor = tensor_field("bhqc", "σ per component, after the sigma_min floor")
    omega: Tensor = tensor_field("bhqc", "ω per component")
