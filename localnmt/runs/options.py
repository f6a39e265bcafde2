"""Command-line options declared once, on the fields of a spec dataclass.

A spec field made with :func:`option` carries its flag, help text and bounds. Then

- :func:`add_options` adds the fields' options to an ``argparse`` parser,
- :func:`from_options` builds the spec back from the parsed namespace,
- :func:`to_argv` writes a spec as the options that give it (for printing and re-running),
- :func:`check_bounds` stops a spec with an out-of-range value (one :class:`UsageError`
  naming the flag).

A ``bool`` field is a switch (``store_true``); a field with ``consts`` is a group of
mutually exclusive switches, each storing its value (``--fp16`` / ``--bf16``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from localnmt import fields
from localnmt.errors import UsageError
from localnmt.fields import FieldInfo

#: What a field's command-line option looks like (the shared field declaration).
OptionInfo = FieldInfo


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str | None = None,
    choices: Iterable[Any] | None = None,
    metavar: str | None = None,
    minimum: float | None = None,
    consts: Sequence[tuple[str, Any]] = (),
    aliases: Sequence[tuple[str, Any]] = (),
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field that is also a command-line option (:func:`localnmt.fields.field`,
    with the help text required)."""
    return fields.field(default, help=help, flag=flag, choices=choices, metavar=metavar,
                        minimum=minimum, consts=consts, aliases=aliases,
                        default_factory=default_factory)  # fmt: skip


def option_fields(spec_cls: type) -> list[tuple[dataclasses.Field, OptionInfo]]:
    """The fields of ``spec_cls`` that are options, in declaration order."""
    return fields.declared(spec_cls)


def flag_of(spec_cls: type, name: str) -> str:
    """The flag of field ``name`` (``max_update`` → ``--max-update``)."""
    for f, info in option_fields(spec_cls):
        if f.name == name:
            return info.flag or "--" + name.replace("_", "-")
    return "--" + name.replace("_", "-")


def _value_type(spec_cls: type, f: dataclasses.Field) -> type:
    kinds = [t for t in fields.types_of(spec_cls, f.name) if t is not type(None)]
    base = kinds[0] if kinds else str
    return base if base in (int, float, str, Path, bool) else str


def add_options(
    parser: argparse.ArgumentParser | Any,
    spec_cls: type,
    *,
    only: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    defaults: dict[str, Any] | None = None,
) -> None:
    """Add an option for each field of ``spec_cls`` (those in ``only``, minus ``exclude``);
    ``defaults`` replaces field defaults (e.g. None where a command decides later)."""
    wanted = set(only) if only is not None else None
    defaults = defaults or {}
    for f, info in option_fields(spec_cls):
        if (wanted is not None and f.name not in wanted) or f.name in exclude:
            continue
        default = defaults.get(f.name, fields.default_of(f))
        required = default is dataclasses.MISSING
        if info.consts:
            group = parser.add_mutually_exclusive_group()
            for flag, value in info.consts:
                group.add_argument(flag, dest=f.name, action="store_const", const=value,
                                   help=f"{info.help}: {value}")  # fmt: skip
            parser.set_defaults(**{f.name: None if required else default})
            continue
        flag = info.flag or "--" + f.name.replace("_", "-")
        kind = _value_type(spec_cls, f)
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action="store_true", default=bool(default),
                                help=info.help)  # fmt: skip
        else:
            extra: dict[str, Any] = {"required": True} if required else {"default": default}
            shown = "" if required or default is None else " (default: %(default)s)"
            parser.add_argument(flag, dest=f.name, type=kind, choices=info.choices,
                                metavar=info.metavar, help=info.help + shown,
                                **extra)  # fmt: skip
        for alias, value in info.aliases:
            parser.add_argument(alias, dest=f.name, action="store_const", const=value,
                                help=f"same as {flag} {value}")  # fmt: skip


def from_options(
    spec_cls: type, ns: argparse.Namespace, *, only: Iterable[str] | None = None, **given: Any
) -> Any:
    """The spec of a parsed namespace: the option fields found in ``ns`` (those in ``only``,
    when a command shares a flag name between two specs), then ``given``."""
    wanted = set(only) if only is not None else None
    names = [f.name for f, _ in option_fields(spec_cls) if wanted is None or f.name in wanted]
    values = {name: getattr(ns, name) for name in names if hasattr(ns, name)}
    values.update(given)
    return spec_cls(**values)


def to_argv(spec: Any, *, always: Iterable[str] = (), skip: Iterable[str] = ()) -> list[str]:
    """The options that give ``spec``: fields at their default are left out, except those
    named in ``always``."""
    argv: list[str] = []
    skipped, shown = set(skip), set(always)
    for f, info in option_fields(type(spec)):
        if f.name in skipped:
            continue
        value = getattr(spec, f.name)
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        if value == default and f.default is not dataclasses.MISSING and f.name not in shown:
            continue
        if info.consts:
            argv += [flag for flag, const in info.consts if const == value]
            continue
        flag = info.flag or "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """A command's own options and the fairseq arguments after the first ``--``."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def check_bounds(spec: Any) -> None:
    """Stop (:class:`UsageError`) when a number is below its field's minimum or not finite."""
    for f, info in option_fields(type(spec)):
        value = getattr(spec, f.name)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        flag = info.flag or "--" + f.name.replace("_", "-")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number, got {value}")
        if info.minimum is not None and value < info.minimum:
            raise UsageError(f"{flag} must be at least {info.minimum:g}, got {value}")
