"""The modifier interface: one small module per method, plugged into one pipeline stage.

Stages, in the order :class:`~localnmt.attention.pipeline.LocalAttention` runs them::

    transform(ctx)            change q / k / v (tied projections, 2D key expansion)
    bias(ctx)                 additive float32 logit bias: a Tensor or a QuadraticBias
    restrict(ctx)             allowed keys before softmax: a bool Tensor or a BandMask
    post(ctx, probs)          change the float32 probabilities after softmax
    value_term(ctx, probs)    a term added to probs @ v (relative value embeddings)
    output_term(ctx, out)     a term computed from the attention output and added to it
                              (BLOCK's gate); needs no probabilities, so any kernel may run

A modifier implements only the stages it needs; the pipeline asks ``uses(stage)``. The
``heads`` option (1-based, from the spec) limits a modifier to some heads: the pipeline leaves
the other heads untouched. Options are declared as a dataclass and parsed from spec strings;
the ``validate`` / ``validate_heads`` classmethods check them against a site before any module
is built (a model checks every layer first, then builds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from localnmt import fields
from localnmt.attention.context import (
    AffinePost,
    AttentionContext,
    AttentionSite,
    BandMask,
    QuadraticBias,
    RelativeTerms,
)
from localnmt.errors import UsageError

if TYPE_CHECKING:
    from localnmt.attention.problem import AttentionProblem
    from localnmt.attention.step_plan import StepPlan

STAGES = ("transform", "bias", "restrict", "post", "value_term", "output_term")
#: Suffix of the incremental-state entries that depend on the source sentence only.
SOURCE_SUFFIX = "@source"


class SpecError(UsageError, ValueError):
    """A bad attention spec or option; the message says what to fix."""


@dataclasses.dataclass
class NoOptions:
    """For modifiers without options."""


class AttentionModifier(nn.Module):
    """Base class of every method. Subclasses set ``name``, ``Options`` and override stages."""

    name: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    #: Sites the method applies to; ``validate`` rejects the others.
    sites: ClassVar[tuple[str, ...]] = ("encoder_self", "decoder_self", "cross")
    #: Whether a stage reads ``ctx.k`` / ``ctx.v`` row by row. In cross-attention, beam search
    #: keeps one key row per sentence instead of per hypothesis only where no modifier does
    #: (``ctx.key_group``; :mod:`localnmt.attention.shared_source`).
    reads_keys: ClassVar[bool] = True
    #: Whether a stage reads ``ctx.query_input`` (the layer input, not the projections).
    reads_layer_input: ClassVar[bool] = False

    @property
    def discards_logits(self) -> bool:
        """Whether the layer's output does not depend on the dot-product logits (the method
        replaces the distribution outright): the queries, keys and other methods' logit
        terms then get no gradient (:mod:`localnmt.attention.unused`)."""
        return False

    def __init__(self, options: Any, site: AttentionSite, heads: list[int] | None = None):
        super().__init__()
        self.options = options
        self.site = site
        self.heads = heads  # 0-based head indices, or None for all heads
        if heads is not None:
            sel = torch.zeros(site.num_heads, dtype=torch.bool)
            sel[heads] = True
            self.register_buffer("head_selection", sel, persistent=False)
        else:
            self.head_selection = None

    # ---- configuration -------------------------------------------------------------------
    @classmethod
    def validate(cls, options: Any, site: AttentionSite) -> None:
        """Raise :class:`SpecError` when the options cannot work at this site."""
        if site.kind not in cls.sites:
            raise SpecError(
                f"method '{cls.name}' does not apply to {site.kind} attention "
                f"(valid: {', '.join(cls.sites)})"
            )

    @classmethod
    def validate_heads(cls, options: Any, site: AttentionSite, heads: list[int] | None) -> None:
        """Raise :class:`SpecError` when the ``heads=`` selection (0-based, None = all; its
        range is already checked) does not fit the options."""

    @classmethod
    def memory_bytes(cls, options: Any, site: AttentionSite, pairs: int) -> int:
        """Bytes one training step keeps for this method at ``site`` beyond plain attention,
        when a batch holds ``pairs`` (sentence, query, key) triples: what the options make
        grow (mixture components, predictor sizes), estimated before any module is built
        (:mod:`localnmt.attention.memory`). 0 (the default): nothing that options can grow."""
        return 0

    def setup(self, attention: nn.Module) -> None:
        """Called once by the attention module after construction (e.g. to replace projections)."""

    #: Key prefix of this modifier's entries in the incremental state (set by the pipeline).
    state_prefix: str = ""

    def get_state(self, ctx: AttentionContext, key: str) -> Tensor | None:
        """This modifier's per-hypothesis tensor ``key`` from the incremental state."""
        return None if ctx.state is None else ctx.state.get(self.state_prefix + key)

    def set_state(
        self, ctx: AttentionContext, key: str, value: Tensor, source: bool = False
    ) -> None:
        """Keep a batch-first tensor for the next decoding step; beam search reorders it.
        ``source=True``: it depends on the source sentence only (cross-attention), so, like
        the cached keys, it moves only when the batch shrinks, not when hypotheses of one
        sentence are reordered."""
        if ctx.state is not None:
            ctx.state[self.state_prefix + key + (SOURCE_SUFFIX if source else "")] = value

    def get_source_state(self, ctx: AttentionContext, key: str) -> Tensor | None:
        """A tensor kept with ``set_state(..., source=True)``."""
        return self.get_state(ctx, key + SOURCE_SUFFIX)

    def uses(self, stage: str) -> bool:
        """Whether this modifier overrides ``stage``."""
        return getattr(type(self), stage) is not getattr(AttentionModifier, stage)

    # ---- stages (defaults do nothing) ---------------------------------------------------
    def transform(self, ctx: AttentionContext) -> None:
        """Change ``ctx.q`` / ``ctx.k`` / ``ctx.v`` (and positions) in place."""

    def bias(self, ctx: AttentionContext) -> Tensor | QuadraticBias | RelativeTerms | None:
        """Additive logit bias, float32, broadcastable to ``(B, H, Tq, Tk)`` (or structured:
        :class:`QuadraticBias`, :class:`RelativeTerms`)."""
        return None

    def restrict(self, ctx: AttentionContext) -> Tensor | BandMask | None:
        """Allowed keys (True = keep), broadcastable to ``(B, H, Tq, Tk)``."""
        return None

    def post(self, ctx: AttentionContext, probs: Tensor) -> Tensor:
        """New probabilities ``(B, H, Tq, Tk)`` from the softmax output."""
        return probs

    def post_affine(self, ctx: AttentionContext) -> AffinePost | None:
        """``post`` as ``p ↦ keep·p + add``, where it is affine in ``p`` and is asked before
        ``p`` exists: the pipeline then keeps a fused kernel for ``p @ V`` (no ``p``, no
        weights). Must give what ``post`` gives; None (the default): ``post`` runs."""
        return None

    def fused_output(self, ctx: AttentionContext, problem: AttentionProblem) -> Tensor | None:
        """The call's whole output ``(B, H, Tq, d)`` where this method's kernel runs the
        attention and its ``post`` stage as one (GMM's decoding step), asked only where
        ``post`` is the call's one stage after the softmax, on every head, and nothing needs
        the probabilities. Must give what the dense path with ``post`` gives; None (the
        default): the pipeline forms the probabilities."""
        return None

    def step_plan(self, ctx: AttentionContext, problem: AttentionProblem) -> StepPlan | None:
        """After :meth:`fused_output` gave a decoding step's output: the same step with the
        queries and query positions left open (:mod:`localnmt.attention.step_plan`), which
        the pipeline runs at the next steps of the decoding run that it fits. Must give what
        :meth:`fused_output` gives on those queries; None (the default): no plan."""
        return None

    def value_term(self, ctx: AttentionContext, probs: Tensor) -> Tensor | None:
        """A ``(B, H, Tq, d)`` term added to ``probs @ v``."""
        return None

    def key_value_terms(self, ctx: AttentionContext) -> tuple[Tensor, Tensor] | None:
        """Terms the pipeline adds to the call's keys and values (after every bias is
        computed), where this method's bias and value term reduce to them for this call; the
        method then gives no bias and says its value term is not needed. None: no fold."""
        return None

    def step_key_value_terms(
        self, keys: int, device: torch.device, incremental: bool
    ) -> tuple[Tensor, Tensor] | None:
        """What :meth:`key_value_terms` gives in a self-attention call of one query, the last
        of ``keys`` keys, without padding (a decoding step; ``incremental``: with a decoding
        state), where it gives the same for every row and this method is the call's only
        one: ``(key term, value term)``, broadcastable to the keys and values, computed
        without the call's context. None (the default): the pipeline builds the call."""
        return None

    def value_term_needed(self, ctx: AttentionContext) -> bool:
        """Whether this call needs :meth:`value_term` (and so the probabilities)."""
        return True

    def relative_terms(self, ctx: AttentionContext) -> RelativeTerms | None:
        """The :class:`RelativeTerms` whose :meth:`~RelativeTerms.value_term` is this method's
        :meth:`value_term` in this call (the same object its :meth:`bias` gave), or None. Where
        it is the call's only value term, the pipeline hands it to the kernels instead of
        calling :meth:`value_term`."""
        return None

    def output_term(self, ctx: AttentionContext, out: Tensor) -> Tensor | None:
        """A ``(B, H, Tq, d)`` term added to the attention output ``out`` (``probs @ v`` with
        the dropped-out probabilities, plus any value terms), computed from it. Unlike
        ``value_term`` it does not need the probabilities: a fused kernel may give ``out``."""
        return None

    def extra_repr(self) -> str:
        heads = "" if self.heads is None else f", heads={[h + 1 for h in self.heads]}"
        return f"{self.options}{heads}"


_REGISTRY: dict[str, type[AttentionModifier]] = {}


def register_modifier(
    cls: type[AttentionModifier],
) -> type[AttentionModifier]:
    """Class decorator: make a modifier available by ``cls.name`` in specs."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"modifier '{cls.name}' registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def modifier_names() -> list[str]:
    return sorted(_REGISTRY)


def get_modifier(name: str) -> type[AttentionModifier]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SpecError(
            f"unknown attention method '{name}' (valid: {', '.join(modifier_names())})"
        ) from None


def build_options(cls: type[AttentionModifier], raw: dict[str, str]) -> Any:
    """Options dataclass of ``cls`` from string values: each parsed by its field's annotated
    type, with its choices checked (:mod:`localnmt.fields`)."""
    known = {f.name: f for f in dataclasses.fields(cls.Options)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            valid = ", ".join(["layers", "heads", *known]) or "layers, heads"
            raise SpecError(f"unknown option '{key}' for method '{cls.name}' (valid: {valid})")
        kinds = fields.types_of(cls.Options, key)
        try:
            parsed = fields.parse_text(value, kinds)
        except ValueError:
            raise SpecError(
                f"option '{key}' of method '{cls.name}' expects {fields.type_name(kinds)}, "
                f"got '{value}'"
            ) from None
        info = fields.info_of(known[key])
        choices = None if info is None else info.choices
        if choices is not None and parsed not in choices:
            raise SpecError(
                f"option '{key}' of method '{cls.name}' must be one of "
                f"{', '.join(map(str, choices))}, got '{value}'"
            )
        values[key] = parsed
    return cls.Options(**values)


def check_positions(
    method: str, key: str, value: float, site: AttentionSite, default: float = 0
) -> None:
    """Refuse an option measured in positions that exceeds the site's maximum positions (no
    sentence is longer, so the larger value changes nothing but what is allocated, and is
    most likely a typo). The method's ``default`` is always accepted: a small model's few
    positions must not make a method's default an error."""
    if value > max(site.max_positions, default):
        raise SpecError(
            f"option '{key}' of method '{method}' is {value:g}, more than the "
            f"{site.max_positions} max positions of {site.kind} attention; use at most "
            f"{site.max_positions}"
        )


def option(default: Any, help: str = "", choices: tuple | None = None) -> Any:
    """Declare an option field: ``window: str = option("query", choices=(...))`` (a
    :func:`localnmt.fields.field`: its annotation is the type spec text is parsed to)."""
    return fields.field(default, help=help, choices=choices)


def apply_head_selection(
    modifier: AttentionModifier, new: Tensor, neutral: Tensor | float | bool
) -> Tensor:
    """Keep ``new`` on the modifier's heads and ``neutral`` on the others (dim 1 = heads)."""
    sel = modifier.head_selection
    if sel is None:
        return new
    shape = [1] * new.dim()
    shape[1] = -1
    if new.size(1) == 1:
        new = new.expand(-1, sel.numel(), *new.shape[2:])
    return torch.where(sel.view(shape), new, neutral)


ModifierFactory = Callable[[AttentionSite], list[AttentionModifier]]
