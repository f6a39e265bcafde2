"""Tensors built on first read.

A ``transform`` can offer a key layout that the generic kernels read but a specialised kernel
does not need: 2D-CSAN's stacked keys (eq. 7–8) are read in place by the band kernel
(fast/band.py), so building them there would be a copy of ``k`` and ``v`` per layer for
nothing. :class:`AttentionContext` and :class:`AttentionProblem` keep ``k`` and ``v`` in
:class:`TensorSlot` fields: assigning a :class:`Deferred` stores it unbuilt, and the first read
of the attribute builds it. A kernel that knows the layout looks at the stored value with
:func:`stored` and never triggers the build.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

import torch
from torch import Tensor


class Deferred:
    """A tensor of known shape (and, where given, dtype), built by ``build()`` the first time
    :meth:`get` is called."""

    __slots__ = ("_build", "_value", "dtype", "shape")

    def __init__(self, build: Callable[[], Tensor], shape: torch.Size | tuple[int, ...],
                 dtype: torch.dtype | None = None):  # fmt: skip
        self._build: Callable[[], Tensor] | None = build
        self._value: Tensor | None = None
        self.shape = torch.Size(shape)
        self.dtype = dtype

    @property
    def built(self) -> bool:
        return self._value is not None

    def get(self) -> Tensor:
        if self._value is None:
            assert self._build is not None
            self._value = self._build()
            self._build = None  # drop the closure's references
            assert self._value.shape == self.shape, (self._value.shape, self.shape)
            assert self.dtype in (None, self._value.dtype), (self._value.dtype, self.dtype)
        return self._value


class TensorSlot:
    """Dataclass field descriptor for a tensor that may be held as a :class:`Deferred`.

    Reading the attribute gives a tensor (building a deferred one once); :func:`stored` gives
    what was assigned. Declared without a default (``k: Tensor = TensorSlot()``), the field
    stays a required ``__init__`` argument: the class-level read raises ``AttributeError``,
    which dataclasses take as "no default"."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.key = slot_key(name)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> TensorSlot: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Tensor: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            raise AttributeError(self.name)
        value = obj.__dict__[self.key]
        return value.get() if isinstance(value, Deferred) else value

    def __set__(self, obj: Any, value: Tensor | Deferred) -> None:
        obj.__dict__[self.key] = value


def slot_key(name: str) -> str:
    return f"_slot_{name}"


def stored(obj: Any, name: str) -> Tensor | Deferred:
    """The value assigned to ``obj.<name>``, a :class:`TensorSlot` field, without building it."""
    return obj.__dict__[slot_key(name)]


def stored_shape(obj: Any, name: str) -> torch.Size:
    """The shape of ``obj.<name>`` without building a deferred value."""
    return stored(obj, name).shape
