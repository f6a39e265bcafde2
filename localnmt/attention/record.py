"""Typed records of what one attention call computed, for analyses (``recording = True``).

A :class:`~localnmt.attention.pipeline.LocalAttention` with ``recording = True`` keeps, after
each forward, an :class:`AttentionRecord` in ``last_record``: the pipeline's own tensors
(logits, probabilities before and after the post stage) and one small dataclass per modifier
that has values of its own (the Gaussian mixture's μ, σ, ω, gate; localness' centre and window;
...), defined beside its method. Analyses read fields, and look a method's values up by type::

    record = attention.last_record
    record.probs                                  # (B, H, Tq, Tk)
    gmm = record.get(GaussianMixtureRecord)       # None when the layer has no gmm
    gmm.sigma                                     # (B, H, Tq, K)

Tensor fields declare their axes (:func:`tensor_field`) so that :meth:`AttentionRecord.select`
can cut one sentence's real tokens out of a batch record, whatever the record type. With
``recording = False`` nothing is built and nothing is kept.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from torch import Tensor

T = TypeVar("T")

#: Axis letters of :func:`tensor_field`: batch, head, query, key, mixture component, feature.
AXES = "bhqkcd"


def tensor_field(axes: str, help: str = "", *, optional: bool = False) -> Any:
    """A tensor field of a record with its axes, e.g. ``"bhqk"`` for ``(B, H, Tq, Tk)``;
    ``optional`` fields default to None."""
    if set(axes) - set(AXES):
        raise ValueError(f"unknown axes in '{axes}' (valid letters: {AXES})")
    metadata = {"axes": axes, "help": help}
    if optional:
        return field(default=None, metadata=metadata)
    return field(metadata=metadata)


def _select(record: Any, batch: int, queries: Any, keys: Any) -> Any:
    """``record`` with every tensor field indexed by ``batch`` (axis b), ``queries`` (axis q)
    and ``keys`` (axis k); other axes are kept. Nested records are selected alike."""
    changes = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        axes = f.metadata.get("axes")
        if isinstance(value, Tensor) and axes is not None:
            index: list[Any] = []
            for axis, size in zip(axes, value.shape, strict=True):
                wanted = {"b": batch, "q": queries, "k": keys}.get(axis, slice(None))
                index.append(slice(None) if size == 1 and axis != "b" else wanted)
            # index one axis at a time: several tensor indices in one [] would pair up
            for position, item in reversed(list(enumerate(index))):
                value = value[(slice(None),) * position + (item,)]
            changes[f.name] = value
        elif isinstance(value, list):
            changes[f.name] = [_select(v, batch, queries, keys) for v in value]
    return dataclasses.replace(record, **changes)


def _detached(values: T) -> T:
    changes = {
        f.name: getattr(values, f.name).detach()
        for f in dataclasses.fields(values)  # type: ignore[arg-type]
        if isinstance(getattr(values, f.name), Tensor)
    }
    return dataclasses.replace(values, **changes)  # type: ignore[type-var]


@dataclass
class AttentionRecord:
    """The intermediates of one attention call (all float32, detached).

    ``probs_before_post`` is the softmax output; ``probs`` what the post stage made of it (the
    attention applied to the values, before dropout). Without a post-stage modifier both are
    the same tensor.
    """

    logits: Tensor | None = tensor_field(
        "bhqk", "q·kᵀ/√d + biases, disallowed keys filled", optional=True
    )
    probs_before_post: Tensor | None = tensor_field("bhqk", "softmax(logits)", optional=True)
    probs: Tensor | None = tensor_field("bhqk", "after the post stage", optional=True)
    #: one record per modifier with values of its own, in pipeline order
    methods: list[Any] = field(default_factory=list)

    def keep_before_post(self, probs: Tensor) -> None:
        """The softmax output, before the post stage changes it."""
        self.probs_before_post = probs.detach()

    def keep_dense(self, logits: Tensor, probs: Tensor) -> None:
        """What the dense path computed: logits and the probabilities after the post stage
        (the same tensor as ``probs_before_post`` where no post stage ran)."""
        self.logits = logits.detach()
        self.probs = probs.detach()
        if self.probs_before_post is None:
            self.probs_before_post = self.probs

    def add(self, values: Any) -> None:
        """Keep a modifier's record (a dataclass; its tensors are detached)."""
        self.methods.append(_detached(values))

    def get(self, kind: type[T]) -> T | None:
        """The first method record of type ``kind``, or None."""
        return next((m for m in self.methods if isinstance(m, kind)), None)

    def select(self, batch: int, queries: Any = slice(None), keys: Any = slice(None)):
        """One sentence of a batch record: ``batch`` index, then ``queries`` / ``keys`` (a
        slice, index tensor or bool mask) on the query and key axes of every tensor."""
        return _select(self, batch, queries, keys)
