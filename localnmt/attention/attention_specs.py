"""A model's attention specs as one typed value: encoder self, decoder self and cross.

:class:`SiteSpec` is one site's spec string with its parsed items (:func:`parse_site`, cached
per string: a string is parsed once per process however often a command line, a preset, a
catalog row and every layer of a model ask for it). :class:`AttentionSpecs` holds the three
sites; the catalog rows, the per-paper presets, the fairseq plugin and the transformers
adapter all carry this value, check it against a model's sizes with :meth:`check` (the spec
code's own checks, no module built) and turn it into fairseq's flags only at the edge
(:meth:`to_fairseq_args`, :meth:`from_fairseq_args`).

Framework-free: this module imports no fairseq and no transformers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from localnmt.attention.context import AttentionSite
from localnmt.attention.modifier import SpecError
from localnmt.attention.spec import ModifierSpec, check_spec, parse_spec, validate_specs

#: The attention sites, in model order.
SITES = ("encoder_self", "decoder_self", "cross")
#: fairseq's argument name (``args.<dest>``) of each site's spec.
FAIRSEQ_DESTS = {
    "encoder_self": "encoder_attn_modifiers",
    "decoder_self": "decoder_attn_modifiers",
    "cross": "cross_attn_modifiers",
}
#: fairseq's flag of each site's spec.
FAIRSEQ_FLAGS = {kind: "--" + dest.replace("_", "-") for kind, dest in FAIRSEQ_DESTS.items()}


@dataclass(frozen=True)
class SiteSpec:
    """One site's spec: the string as written (kept for fairseq's flags, checkpoints and
    run fingerprints) and its parsed items. Build it with :func:`parse_site`."""

    text: str = ""
    #: equal strings parse alike: equality and hashing look at ``text`` only
    items: tuple[ModifierSpec, ...] = dataclasses.field(default=(), compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __str__(self) -> str:
        return self.text

    @property
    def methods(self) -> list[str]:
        """The method names, in spec order."""
        return [item.method for item in self.items]


@lru_cache(maxsize=512)
def parse_site(text: str | None) -> SiteSpec:
    """``text`` parsed (:func:`~localnmt.attention.spec.parse_spec`: syntax, methods, option
    names and values; :class:`SpecError` with what to fix), once per process and string."""
    text = "" if text is None else text
    return SiteSpec(text, tuple(parse_spec(text)))


@dataclass(frozen=True)
class Stack:
    """The sizes of one side of a model (encoder or decoder) that specs are checked against."""

    layers: int
    heads: int
    embed_dim: int
    max_positions: int = 1024

    def site(self, kind: str, layer: int) -> AttentionSite:
        """The site of ``kind`` at 0-based ``layer``."""
        return AttentionSite(kind, layer, num_layers=self.layers, embed_dim=self.embed_dim,
                             num_heads=self.heads, max_positions=self.max_positions)  # fmt: skip

    def sites(self, kind: str) -> list[AttentionSite]:
        """Every layer's site of ``kind``."""
        return [self.site(kind, layer) for layer in range(self.layers)]


def side_of(kind: str) -> str:
    """``encoder`` for encoder self-attention, ``decoder`` for the two decoder sites."""
    return "encoder" if kind == "encoder_self" else "decoder"


def check_site(spec: SiteSpec, kind: str, stack: Stack) -> None:
    """One site's spec against its side's sizes: heads divide the width, ``layers=`` and
    ``heads=`` in range, every layer's site accepted by the methods (no module built)."""
    if stack.embed_dim % stack.heads:
        raise SpecError(
            f"{kind} attention: embedding dim {stack.embed_dim} is not divisible by "
            f"{stack.heads} heads"
        )
    check_spec(list(spec.items), kind, stack.layers, stack.heads)
    for site in stack.sites(kind):
        validate_specs(list(spec.items), site)


@dataclass(frozen=True)
class AttentionSpecs:
    """The specs of the three sites. A site left None is not set here: a preset's (or the
    plain attention) applies (:meth:`over`); ``parse_site("")`` sets it to no method."""

    encoder_self: SiteSpec | None = None
    decoder_self: SiteSpec | None = None
    cross: SiteSpec | None = None

    @classmethod
    def parse(
        cls,
        encoder_self: str | None = None,
        decoder_self: str | None = None,
        cross: str | None = None,
    ) -> AttentionSpecs:
        """The specs of three strings (None: the site is not set)."""
        texts = {"encoder_self": encoder_self, "decoder_self": decoder_self, "cross": cross}
        return cls(**{k: None if t is None else parse_site(t) for k, t in texts.items()})

    @classmethod
    def from_mapping(cls, texts: Mapping[str, str | None]) -> AttentionSpecs:
        """The specs of ``{site: string}`` (a YAML ``attention:`` mapping, a saved config);
        an unknown site is a :class:`SpecError`."""
        unknown = [k for k in texts if k not in SITES]
        if unknown:
            raise SpecError(f"unknown attention site {unknown[0]!r} (valid: {', '.join(SITES)})")
        return cls.parse(**texts)

    @classmethod
    def from_namespace(cls, ns: Any) -> AttentionSpecs:
        """The specs of fairseq's parsed arguments (or a config with the same names); a
        missing or None argument leaves the site unset."""
        return cls.parse(**{kind: getattr(ns, dest, None) for kind, dest in FAIRSEQ_DESTS.items()})

    @classmethod
    def from_fairseq_args(cls, argv: Sequence[str]) -> tuple[AttentionSpecs, tuple[str, ...]]:
        """The specs given by fairseq flags in ``argv`` and the other arguments, in order
        (a flag given twice: the last wins, as in argparse)."""
        by_flag = {flag: kind for kind, flag in FAIRSEQ_FLAGS.items()}
        texts: dict[str, str] = {}
        rest: list[str] = []
        args = iter(argv)
        for arg in args:
            flag, eq, value = arg.partition("=")
            if flag not in by_flag:
                rest.append(arg)
                continue
            if not eq:
                value = next(args, None)
                if value is None:
                    raise SpecError(f"{flag} needs a spec")
            texts[by_flag[flag]] = value
        return cls.parse(**texts), tuple(rest)

    def site(self, kind: str) -> SiteSpec:
        """The spec of ``kind`` (no method where it is not set)."""
        if kind not in SITES:
            raise SpecError(f"unknown attention site {kind!r} (valid: {', '.join(SITES)})")
        return getattr(self, kind) or parse_site("")

    def given(self) -> Iterator[tuple[str, SiteSpec]]:
        """``(site, spec)`` of the sites that are set, in model order."""
        for kind in SITES:
            spec = getattr(self, kind)
            if spec is not None:
                yield kind, spec

    def __bool__(self) -> bool:
        """Whether any site is set."""
        return any(True for _ in self.given())

    def over(self, defaults: AttentionSpecs) -> AttentionSpecs:
        """These specs where set, ``defaults``' elsewhere (a command line over a preset)."""
        return dataclasses.replace(defaults, **dict(self.given()))

    def texts(self) -> dict[str, str]:
        """``{site: spec string}`` of every site ('' where none is set)."""
        return {kind: self.site(kind).text for kind in SITES}

    def to_fairseq_args(self) -> list[str]:
        """The fairseq flags of the sites that are set, in model order."""
        return [x for kind, spec in self.given() for x in (FAIRSEQ_FLAGS[kind], spec.text)]

    def check(self, encoder: Stack, decoder: Stack | None = None) -> None:
        """Every site's spec against its side's sizes (:func:`check_site`); ``decoder``
        None: an encoder-only model, where a decoder site's method is an error."""
        for kind in SITES:
            spec = self.site(kind)
            if side_of(kind) == "encoder":
                check_site(spec, kind, encoder)
            elif decoder is not None:
                check_site(spec, kind, decoder)
            elif spec:
                raise SpecError(f"{kind} attention: this model has no decoder (spec {spec})")
