"""The YAML files of ``configs/``: where they are, reading them, and a schema check on load.

``configs/`` holds the experiments as data: one file per paper (its catalog rows, read by
:mod:`localnmt.catalog`) and ``recipes.yaml`` (training recipes, read by
:mod:`localnmt.runs.recipes`). Installed, the folder is the package data ``localnmt/configs/``;
in a source checkout (editable install, or ``PYTHONPATH`` at the checkout) it is the
top-level ``configs/`` beside the package. ``LOCALNMT_CONFIGS=DIR`` points at another folder
(e.g. an edited copy next to a non-editable install).

Every mapping of a file is checked against a :class:`Key` schema: an unknown key, a missing
required key or a value of the wrong type is one :class:`ConfigError` naming the file and the
key (``configs/yang2018.yaml: rows[3] (Table 1 / Fixed): unknown key 'argz' ...``). A mapping
that becomes a dataclass takes its schema from the dataclass (:func:`keys_of`: the fields'
annotations and :mod:`localnmt.fields` declarations, the ones command lines and spec options
read too).

This module imports only the standard library, PyYAML, :mod:`localnmt.errors` and
:mod:`localnmt.fields`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from localnmt import fields
from localnmt.errors import ConfigError

__all__ = ["ConfigError", "Key", "check", "config_dir", "keys_of", "read_yaml"]

ENV_VAR = "LOCALNMT_CONFIGS"


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe loader that also reads an exponent without a dot (``7e-4``) as a number; PyYAML
    follows YAML 1.1, where a float needs a dot (``7e-4`` would be the string "7e-4")."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)
_LOADER = _Loader


@dataclass(frozen=True)
class Key:
    """One key of a config mapping: its type(s), whether it must be given, list item type."""

    types: type | tuple[type, ...]
    required: bool = False
    #: for a list value: the type every item must have
    items: type | tuple[type, ...] | None = None
    #: allowed values (None: any value of the right type)
    choices: tuple[Any, ...] | None = None


def _yaml_types(kinds: tuple[type, ...]) -> tuple[type, ...]:
    """A tuple field is a YAML list; ``Any`` admits anything."""
    out = tuple(dict.fromkeys(list if k is tuple else k for k in kinds))
    return (object,) if object in out else out


def _one(types: tuple[type, ...]) -> type | tuple[type, ...]:
    return types[0] if len(types) == 1 else types


def keys_of(cls: type, *, exclude: tuple[str, ...] = ()) -> dict[str, Key]:
    """The schema of the mappings that become dataclass ``cls``: a key per field (but
    ``exclude``), typed by its annotation (``tuple[int, ...]`` is a list of integers), required
    where the field has no default, with the choices and list item type of its
    :func:`localnmt.fields.field` declaration."""
    keys: dict[str, Key] = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        info = fields.info_of(f) or fields.FieldInfo()
        given = info.items or fields.item_types(cls, f.name)
        items = (
            None if given is None else _yaml_types(given if isinstance(given, tuple) else (given,))
        )
        types = _yaml_types(fields.types_of(cls, f.name))
        keys[f.name] = Key(
            _one(types),
            required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            items=None if items is None else _one(items),
            choices=info.choices,
        )
    return keys


def config_dir() -> Path:
    """The folder of the config files (see the module docstring for the search order)."""
    override = os.environ.get(ENV_VAR)
    if override:
        path = Path(override)
        if not path.is_dir():
            raise ConfigError(f"{ENV_VAR}={override}: not a directory")
        return path
    package = Path(__file__).resolve().parent
    for path in (package / "configs", package.parent / "configs"):  # installed, checkout
        if path.is_dir():
            return path
    raise ConfigError(
        f"no configs folder: looked for {package / 'configs'} (installed package) and "
        f"{package.parent / 'configs'} (source checkout); set {ENV_VAR}=DIR to choose one"
    )


def read_yaml(path: Path | str) -> Any:
    """The parsed content of one YAML file; a syntax error names the file and line."""
    path = Path(path)
    try:
        return _read(path, path.stat().st_mtime_ns)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None


@cache
def _read(path: Path, mtime_ns: int) -> Any:  # cached per file version
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None


def _type_names(types: type | tuple[type, ...]) -> str:
    names = {bool: "true/false", str: "a string", int: "an integer", float: "a number",
             list: "a list", dict: "a mapping", type(None): "null"}  # fmt: skip
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(names.get(t, t.__name__) for t in types)


def _is(value: Any, types: type | tuple[type, ...]) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if object in types:
        return True
    if isinstance(value, bool):  # YAML true/false is no number
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    if isinstance(value, float) and not math.isfinite(value):  # .inf, .nan, 1e999
        return False
    return isinstance(value, types)


def check(data: Any, schema: dict[str, Key], where: str) -> dict[str, Any]:
    """``data`` as a mapping that has only the keys of ``schema``, every required one, each of
    its type; ints given for floats become floats. ``where`` prefixes every message (file and
    position, e.g. ``configs/yang2018.yaml: rows[3] (Table 1 / Fixed)``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = [k for k in data if k not in schema]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (valid keys: {', '.join(schema)})")
    missing = [k for k, key in schema.items() if key.required and k not in data]
    if missing:
        raise ConfigError(f"{where}: missing key {missing[0]!r}")
    out: dict[str, Any] = {}
    for name, value in data.items():
        key = schema[name]
        if not _is(value, key.types):
            raise ConfigError(
                f"{where}: key {name!r} must be {_type_names(key.types)}, got "
                f"{type(value).__name__} {value!r}"
            )
        if key.items is not None and isinstance(value, list):
            for i, item in enumerate(value):
                if not _is(item, key.items):
                    hint = " (quote it)" if key.items is str else ""
                    raise ConfigError(
                        f"{where}: key {name!r}, item {i}: must be {_type_names(key.items)}, "
                        f"got {type(item).__name__} {item!r}{hint}"
                    )
        if key.choices is not None and value not in key.choices:
            valid = ", ".join(str(c) for c in key.choices)
            raise ConfigError(f"{where}: key {name!r}: {value!r} is not one of {valid}")
        types = key.types if isinstance(key.types, tuple) else (key.types,)
        if isinstance(value, int) and not isinstance(value, bool) and int not in types:
            value = float(value)  # 88 where a number is expected: 88.0
        out[name] = value
    return out
