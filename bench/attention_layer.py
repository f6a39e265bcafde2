"""One attention layer per method: forward + backward time and peak memory vs a plain layer.

Each method is one :class:`~localnmt.attention.pipeline.LocalAttention` built from a spec
string (its default options unless the spec says otherwise) at a site it applies to; the
reference is the same module with no modifier (fused dense attention), measured A/B
interleaved with it. fairseq's own ``MultiheadAttention`` is measured the same way (entry
``fairseq_mha``). Inputs: ``(T, B, H·d)``, left padding (10 % length jitter) for encoder
self- and cross-attention, fairseq's causal float mask for decoder self-attention.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from bench.measure import interleaved, median_ratio, peak_memory
from bench.models import count_parameters
from bench.synthetic import random_lengths

#: Order in which a method's sites are tried when the spec names none.
SITE_PREFERENCE = ("encoder_self", "decoder_self", "cross")
PLAIN = "plain"
FAIRSEQ = "fairseq_mha"


@dataclass(frozen=True)
class MethodEntry:
    """A method to measure: ``site:spec`` (``spec`` as for ``--encoder-attn-modifiers``)."""

    site: str
    spec: str

    @property
    def label(self) -> str:
        return self.spec if self.spec in (PLAIN, FAIRSEQ) else f"{self.site}:{self.spec}"


def default_entries(heads: int = 8) -> list[MethodEntry]:
    """Every registered method at its first applicable site: with default options when they
    are valid, else the first spec item of the catalog that uses the method (e.g. Pande et
    al.'s ``local_heads`` needs ``masks=...``)."""
    from localnmt.attention.context import AttentionSite
    from localnmt.attention.modifier import SpecError, build_options, get_modifier, modifier_names

    entries = [MethodEntry("encoder_self", FAIRSEQ)]
    catalog: list[tuple[str, str]] | None = None
    for name in modifier_names():
        cls = get_modifier(name)
        site = next((s for s in SITE_PREFERENCE if s in cls.sites), cls.sites[0])
        try:
            cls.validate(build_options(cls, {}), AttentionSite(site, 0, 1, heads * 64, heads))
            entries.append(MethodEntry(site, name))
            continue
        except SpecError:
            pass
        if catalog is None:
            catalog = catalog_spec_items()
        found = next(((s, text) for s, text in catalog if _method_of(text) == name), None)
        if found is None:  # borrow the options of another method's catalog item
            found = next(
                ((site, spec) for _, text in catalog if (spec := _borrow(name, text, site, heads))),
                None,
            )
        entries.append(MethodEntry(*found) if found else MethodEntry(site, name))
    return entries


def _borrow(name: str, item: str, site: str, heads: int) -> str | None:
    """``name[options of item]`` when those options are valid for ``name`` at ``site``."""
    from localnmt.attention.context import AttentionSite
    from localnmt.attention.spec import parse_spec, validate_specs

    if "[" not in item:
        return None
    spec = f"{name}[{item.split('[', 1)[1]}"
    try:
        validate_specs(parse_spec(spec), AttentionSite(site, 0, 1, heads * 64, heads))
    except Exception:
        return None
    return spec


def _method_of(item: str) -> str:
    return item.split("[", 1)[0].strip()


def catalog_spec_items() -> list[tuple[str, str]]:
    """``(site, spec item)`` of every catalog row's three spec flags (arch presets included),
    without ``layers=`` (a single layer is layer 1)."""
    import re

    from bench.models import parse_model_args
    from localnmt.catalog import all_rows

    flags = {
        "encoder_attn_modifiers": "encoder_self",
        "decoder_attn_modifiers": "decoder_self",
        "cross_attn_modifiers": "cross",
    }
    items: list[tuple[str, str]] = []
    for row in all_rows():
        try:
            ns = parse_model_args(row.arch, row.args, [], quiet=True)
        except (Exception, SystemExit):
            continue
        for flag, site in flags.items():
            for item in (getattr(ns, flag, None) or "").split("+"):
                item = re.sub(r"layers=[^,\]]*,?", "", item.strip()).replace("[]", "")
                item = item.replace(",]", "]")
                if item and item.lower() != "none" and (site, item) not in items:
                    items.append((site, item))
    return items


def parse_entry(text: str) -> MethodEntry:
    """``'cross:gmm[k=2]'`` or ``'localness'`` (site = first applicable)."""
    from localnmt.attention.modifier import get_modifier
    from localnmt.attention.spec import parse_spec

    site, sep, spec = text.partition(":")
    if not sep or site not in SITE_PREFERENCE:
        site, spec = "", text
    if spec in (PLAIN, FAIRSEQ):
        return MethodEntry(site or "encoder_self", spec)
    specs = parse_spec(spec)
    if not site:
        sites = get_modifier(specs[0].method).sites
        site = next((s for s in SITE_PREFERENCE if s in sites), sites[0])
    return MethodEntry(site, spec)


def build_layer(entry: MethodEntry, embed_dim: int, heads: int, max_positions: int) -> nn.Module:
    """The attention module of ``entry`` (layer 1 of 1)."""
    from fairseq.modules import MultiheadAttention

    from localnmt.attention.context import AttentionSite
    from localnmt.attention.pipeline import LocalAttention
    from localnmt.attention.spec import build_modifiers, parse_spec

    cross = entry.site == "cross"
    if entry.spec == FAIRSEQ:
        return MultiheadAttention(
            embed_dim, heads, self_attention=not cross, encoder_decoder_attention=cross
        )
    site = AttentionSite(entry.site, 0, 1, embed_dim, heads, max_positions=max_positions)
    spec = "" if entry.spec == PLAIN else entry.spec
    return LocalAttention(
        embed_dim,
        heads,
        site=site,
        modifiers=build_modifiers(parse_spec(spec), site),
        self_attention=not cross,
        encoder_decoder_attention=cross,
    )


@dataclass
class LayerInputs:
    query: Tensor
    key: Tensor
    key_padding_mask: Tensor | None
    attn_mask: Tensor | None


def make_inputs(
    site: str, batch: int, length: int, embed_dim: int, device, dtype, seed: int = 0
) -> LayerInputs:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(length, batch, embed_dim, generator=gen).to(device, dtype)
    x.requires_grad_(True)
    if site == "decoder_self":
        future = torch.triu(torch.full((length, length), float("-inf")), 1)
        return LayerInputs(x, x, None, future.to(device))
    lengths = random_lengths(batch, length, 0.1, gen)
    positions = torch.arange(length)[None, :]
    padding = positions < (length - lengths)[:, None]  # left padding
    key = x
    if site == "cross":
        key = torch.randn(length, batch, embed_dim, generator=gen).to(device, dtype)
        key.requires_grad_(True)
    return LayerInputs(x, key, padding.to(device), None)


def fwd_bwd(layer: nn.Module, inputs: LayerInputs) -> Callable[[], None]:
    """One forward + backward of ``layer`` (the sum of its output as loss)."""

    def run() -> None:
        out, _ = layer(
            inputs.query,
            inputs.key,
            inputs.key,
            key_padding_mask=inputs.key_padding_mask,
            attn_mask=inputs.attn_mask,
            need_weights=False,
        )
        out.float().sum().backward()
        layer.zero_grad(set_to_none=True)
        inputs.query.grad = None
        inputs.key.grad = None

    return run


def with_kernel(fn: Callable[[], None], name: str | None) -> Callable[[], None]:
    if name is None:
        return fn

    from localnmt.attention.dispatch import forced_kernel

    def run() -> None:
        with forced_kernel(name):
            fn()

    return run


def chosen_path(layer: nn.Module, inputs: LayerInputs, kernel: str | None = None) -> str:
    """Which code path the pipeline takes on these inputs, as its kernel trace reports it:
    ``dense`` (the reference, when probabilities are needed), the kernel that ran, or
    ``fairseq`` for fairseq's module. With ``kernel`` only that one is tried (forced): a
    ``KernelDeclined`` error says why it declined."""
    from localnmt.attention import dispatch, pipeline

    if not isinstance(layer, pipeline.LocalAttention):
        return "fairseq"
    if kernel is None:  # the automatic choice, with gradients on
        with dispatch.trace() as seen:
            fwd_forward(layer, inputs)()
        ran = seen.kernels("attention")
        return "dense" if "dense" in ran or not ran else ran[0]
    with torch.no_grad():
        forward = fwd_forward(layer, inputs)
        with dispatch.trace() as seen:
            forward()
        if "dense" in seen.kernels("attention"):
            return "dense"
        with dispatch.forced_kernel(kernel):
            forward()
        return kernel


def fwd_forward(layer: nn.Module, inputs: LayerInputs) -> Callable[[], None]:
    def run() -> None:
        layer(
            inputs.query,
            inputs.key,
            inputs.key,
            key_padding_mask=inputs.key_padding_mask,
            attn_mask=inputs.attn_mask,
            need_weights=False,
        )

    return run


def compare_layers(
    plain: nn.Module,
    candidate: nn.Module,
    inputs: LayerInputs,
    device: torch.device,
    *,
    kernel: str | None,
    warmup: int,
    repeats: int,
    memory: bool = True,
) -> dict[str, Any]:
    """Median seconds of both, median paired time ratio (candidate / plain), peak memory."""
    cand_fn = with_kernel(fwd_bwd(candidate, inputs), kernel)
    plain_fn = fwd_bwd(plain, inputs)
    times = interleaved(
        {"plain": plain_fn, "candidate": cand_fn}, device, warmup=warmup, repeats=repeats
    )
    out: dict[str, Any] = {
        "candidate_s": statistics.median(times["candidate"]),
        "plain_s": statistics.median(times["plain"]),
        "time_ratio": median_ratio(times["candidate"], times["plain"]),
        "candidate_seconds": times["candidate"],
        "plain_seconds": times["plain"],
    }
    if memory:
        out["candidate_peak_bytes"] = peak_memory(cand_fn, device)
        out["plain_peak_bytes"] = peak_memory(plain_fn, device)
        out["memory_ratio"] = out["candidate_peak_bytes"] / max(1, out["plain_peak_bytes"])
    return out


def param_delta(candidate: nn.Module, plain: nn.Module) -> int:
    return count_parameters(candidate) - count_parameters(plain)
