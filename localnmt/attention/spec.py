"""Attention specs: which method, which layers, which heads, which options.

Grammar (one string per attention site, see ``--encoder-attn-modifiers``)::

    spec    := item ('+' item)*  |  'none'  |  ''
    item    := method ['[' opt (',' opt)* ']']
    opt     := key '=' value
    layers  := 'all' | range (';' range)*      range := N | N '-' M   (1-based, inclusive)
    heads   := 'all' | range (';' range)*      (1-based, inclusive)

Example: ``localness[layers=1-3,window=query] + rel_pos[clip=16]``.

A model parses each site's string once (:func:`parse_spec`: syntax, method names, option
names and values), checks the result against its sizes (:func:`check_spec`) and every layer's
site (:func:`validate_specs`: the methods' ``validate`` classmethods, no module built), then
builds each layer's modifiers from the same parsed specs (:func:`build_modifiers`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from localnmt.attention.context import AttentionSite
from localnmt.attention.modifier import (
    AttentionModifier,
    SpecError,
    build_options,
    get_modifier,
)

_ITEM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(.*)\])?\s*$", re.S)


@dataclass
class ModifierSpec:
    """One parsed item of a spec string.

    ``options`` keeps the option strings as written; ``values`` is the method's ``Options``
    dataclass built from them (types and choices checked) when the item was parsed.
    """

    method: str
    layers: list[int] | None = None  # 0-based; None = every layer
    heads: list[int] | None = None  # 0-based; None = every head
    options: dict[str, str] = field(default_factory=dict)
    layers_text: str = "all"
    heads_text: str = "all"
    values: Any = None

    @property
    def modifier(self) -> type[AttentionModifier]:
        return get_modifier(self.method)

    def applies_to(self, layer: int) -> bool:
        """Whether this item configures 0-based ``layer``."""
        return self.layers is None or layer in self.layers


def parse_ranges(text: str, what: str) -> list[int] | None:
    """``'1-3;5'`` → ``[0, 1, 2, 4]`` (1-based text, 0-based result); ``'all'`` → None."""
    text = text.strip()
    if text.lower() in ("all", "*", ""):
        return None
    out: list[int] = []
    for part in re.split(r"[;:\s]+", text):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise SpecError(f"bad {what} range '{part}' (use e.g. 1-3 or 1;4-6, 1-based)")
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if lo < 1 or hi < lo:
            raise SpecError(f"bad {what} range '{part}': {what} count from 1 and ranges rise")
        out.extend(range(lo - 1, hi))
    return sorted(set(out))


def _split_options(body: str) -> list[str]:
    return [p for p in (s.strip() for s in body.split(",")) if p]


def parse_spec(text: str | None) -> list[ModifierSpec]:
    """Parse a spec string; raise :class:`SpecError` with what to fix."""
    if text is None or text.strip().lower() in ("", "none"):
        return []
    specs = []
    for raw_item in text.split("+"):
        m = _ITEM.match(raw_item)
        if not m:
            raise SpecError(
                f"cannot parse '{raw_item.strip()}' (expected method[key=value,...], "
                "items joined by '+')"
            )
        method, body = m.group(1), m.group(2) or ""
        cls = get_modifier(method)
        spec = ModifierSpec(method=method)
        for opt in _split_options(body):
            if "=" not in opt:
                raise SpecError(f"option '{opt}' of method '{method}' needs key=value")
            key, value = (s.strip() for s in opt.split("=", 1))
            if key == "layers":
                spec.layers, spec.layers_text = parse_ranges(value, "layers"), value
            elif key == "heads":
                spec.heads, spec.heads_text = parse_ranges(value, "heads"), value
            else:
                spec.options[key] = value
        spec.values = build_options(cls, spec.options)  # unknown keys and bad values fail here
        specs.append(spec)
    return specs


def check_spec(specs: list[ModifierSpec], kind: str, num_layers: int, num_heads: int) -> None:
    """Check layer and head ranges against the model's sizes."""
    for spec in specs:
        if spec.layers is not None and spec.layers and spec.layers[-1] >= num_layers:
            raise SpecError(
                f"method '{spec.method}' at {kind} attention: layers={spec.layers_text} is out "
                f"of range; this model has {num_layers} layers (valid: 1-{num_layers})"
            )
        if spec.heads is not None and spec.heads and spec.heads[-1] >= num_heads:
            raise SpecError(
                f"method '{spec.method}' at {kind} attention: heads={spec.heads_text} is out "
                f"of range; this attention has {num_heads} heads (valid: 1-{num_heads})"
            )


def validate_specs(specs: list[ModifierSpec], site: AttentionSite) -> None:
    """Check the items that apply at ``site`` (its layer) against that site: the methods'
    ``validate`` and ``validate_heads`` classmethods, on the parsed options. No module (and no
    parameter) is built."""
    for spec in specs:
        if spec.applies_to(site.layer):
            cls = spec.modifier
            cls.validate(spec.values, site)
            cls.validate_heads(spec.values, site, spec.heads)


def build_modifiers(specs: list[ModifierSpec], site: AttentionSite) -> list[AttentionModifier]:
    """The modifiers that apply at ``site`` (its layer), in spec order, from parsed specs
    (validated first; each module gets its own copy of the options)."""
    validate_specs(specs, site)
    return [
        spec.modifier(copy.copy(spec.values), site, heads=spec.heads)
        for spec in specs
        if spec.applies_to(site.layer)
    ]
