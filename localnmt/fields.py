"""Typed fields as options: one declaration, read by every place that turns text into values.

A field is a dataclass field whose metadata holds a :class:`FieldInfo` (made with
:func:`field`); its type is the field's annotation. Three readers use the same declaration:

- command lines (:mod:`localnmt.runs.options`: flag, help, choices, minimum, switches),
- YAML files (:mod:`localnmt.config_files`: a schema from a dataclass, :func:`schema_types`),
- the options of attention methods in spec strings (:mod:`localnmt.attention.modifier`:
  ``localness[window=query]``, text parsed by :func:`parse_text` by the annotated type).

This module imports only the standard library.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

#: The metadata key of a field's :class:`FieldInfo`.
META = "localnmt_field"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class FieldInfo:
    """What a field accepts beyond its type, and how a command line spells it."""

    help: str = ""
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None  # smallest allowed value (inclusive)
    flag: str | None = None  # command line: default --field-name
    metavar: str | None = None
    consts: tuple[tuple[str, Any], ...] = ()  # command line: (flag, value) switches
    aliases: tuple[tuple[str, Any], ...] = ()  # command line: extra (flag, value) switches
    items: type | tuple[type, ...] | None = None  # YAML: the type of a list's items


def field(
    default: Any = dataclasses.MISSING,
    *,
    help: str = "",
    choices: Iterable[Any] | None = None,
    minimum: float | None = None,
    flag: str | None = None,
    metavar: str | None = None,
    consts: Sequence[tuple[str, Any]] = (),
    aliases: Sequence[tuple[str, Any]] = (),
    items: type | tuple[type, ...] | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field with its :class:`FieldInfo`."""
    info = FieldInfo(help, None if choices is None else tuple(choices), minimum, flag, metavar,
                     tuple(consts), tuple(aliases), items)  # fmt: skip
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={META: info})
    return dataclasses.field(default=default, metadata={META: info})


def info_of(f: dataclasses.Field) -> FieldInfo | None:
    """The :class:`FieldInfo` of a field made with :func:`field` (None for another)."""
    return f.metadata.get(META)


def declared(cls: type) -> list[tuple[dataclasses.Field, FieldInfo]]:
    """The fields of dataclass ``cls`` made with :func:`field`, in declaration order."""
    return [(f, f.metadata[META]) for f in dataclasses.fields(cls) if META in f.metadata]


def default_of(f: dataclasses.Field) -> Any:
    """The field's default (from its factory if it has one); ``MISSING`` if it has none."""
    if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def types_of(cls: type, name: str) -> tuple[type, ...]:
    """The types field ``name`` of ``cls`` admits, from its annotation: ``int | None`` →
    ``(int, NoneType)``; ``tuple[str, ...]`` → ``(tuple,)``; ``Any`` → ``(object,)``."""
    hint = _hints(cls)[name]
    args = typing.get_args(hint) if _is_union(hint) else (hint,)
    return tuple(typing.get_origin(a) or (object if a is Any else a) for a in args)


def item_types(cls: type, name: str) -> tuple[type, ...] | None:
    """The item type of a list or tuple field (``tuple[str, ...]`` → ``(str,)``), else None."""
    hint = _hints(cls)[name]
    for arg in typing.get_args(hint) if _is_union(hint) else (hint,):
        if typing.get_origin(arg) in (list, tuple):
            inner = [typing.get_origin(a) or a for a in typing.get_args(arg) if a is not Ellipsis]
            return tuple(dict.fromkeys(inner)) or None
    return None


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def type_name(kinds: tuple[type, ...]) -> str:
    """``(int, NoneType)`` → ``int|None``."""
    return "|".join("None" if t is type(None) else t.__name__ for t in kinds)


def parse_text(text: str, kinds: tuple[type, ...]) -> Any:
    """``text`` as a value of one of ``kinds`` (``none`` for None where allowed; ``true`` /
    ``false``, ``yes`` / ``no``, ``on`` / ``off``, ``1`` / ``0`` for a bool); ``ValueError``
    when it is none of them."""
    if type(None) in kinds and text.lower() == "none":
        return None
    for kind in kinds:
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
        elif kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        elif kind in (str, object):
            return text
    raise ValueError(f"expects {type_name(kinds)}, got {text!r}")
