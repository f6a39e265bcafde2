"""How big the quickstart's models are, per device, and which systems it compares.

The quickstart trains every system for an equal share of a wall-clock budget, so the sizes are
chosen for the device: on a 2-core CPU a small model that makes many updates in its share (the
sweep behind the choice, and what the default run reached, are in ``docs/quickstart.md``); on a
GPU a base-width model with fp16 and more systems. The numbers are data, in
``configs/quickstart.yaml``, read on first use (a broken file is one error, exit 2). Presets
that name layers 1–3 (Localness, CSAN) need at least three encoder layers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from localnmt import config_files
from localnmt.config_files import ConfigError, Key


@dataclass(frozen=True)
class Sizing:
    """Model, vocabulary, batch and schedule of one device class."""

    device: str
    embed_dim: int
    ffn_dim: int
    heads: int
    layers: int
    bpe_merges: int
    max_tokens: int
    lr: float
    warmup: int
    dropout: float
    budget_minutes: float
    systems: tuple[str, ...]
    precision: tuple[str, ...] = field(default_factory=tuple)

    def fairseq_args(self) -> list[str]:
        """fairseq-train overrides, given after the ``cpu`` recipe's arguments."""
        # configs/recipes.yaml is read here, inside the quickstart's error handler, not at import
        from localnmt.runs.recipes import dim_overrides

        return [
            *dim_overrides(self.embed_dim, self.ffn_dim, self.heads, self.layers),
            "--max-tokens", str(self.max_tokens),
            "--lr", str(self.lr),
            "--warmup-updates", str(self.warmup),
            "--dropout", str(self.dropout),
            *self.precision,
        ]  # fmt: skip

    def describe(self) -> str:
        """One line for logs and the report."""
        return (
            f"{self.embed_dim}-dim {self.layers}+{self.layers}-layer Transformer "
            f"({self.heads} heads, FFN {self.ffn_dim}), {self.bpe_merges} BPE merges, "
            f"{self.max_tokens}-token batches, lr {self.lr:g}, {self.warmup} warm-up updates, "
            f"dropout {self.dropout:g}{', ' + ' '.join(self.precision) if self.precision else ''}"
        )


BASELINE = "vaswani2017/table-3/transformer-base/base"

SIZING_KEYS = {
    "embed_dim": Key(int, required=True),
    "ffn_dim": Key(int, required=True),
    "heads": Key(int, required=True),
    "layers": Key(int, required=True),
    "bpe_merges": Key(int, required=True),
    "max_tokens": Key(int, required=True),
    "lr": Key(float, required=True),
    "warmup": Key(int, required=True),
    "dropout": Key(float, required=True),
    "budget_minutes": Key(float, required=True),
    "systems": Key(list, required=True, items=str),
    "precision": Key(list, items=str),
}
DEVICES = {"cpu": "cpu", "cuda": "cuda", "tiny": "cpu"}


def load_sizings(path: Path | str | None = None) -> dict[str, Sizing]:
    """The sizings of ``configs/quickstart.yaml`` (or ``path``), checked: an unknown, missing
    or mistyped key is one :class:`~localnmt.config_files.ConfigError` naming file and key."""
    path = Path(path) if path is not None else config_files.config_dir() / "quickstart.yaml"
    data = config_files.check(config_files.read_yaml(path),
                              {"sizings": Key(dict, required=True)}, str(path))  # fmt: skip
    sizings = {}
    for name, raw in data["sizings"].items():
        where = f"{path}: sizings.{name}"
        if name not in DEVICES:
            raise ConfigError(f"{where}: unknown sizing (valid: {', '.join(DEVICES)})")
        item = config_files.check(raw, SIZING_KEYS, where)
        if item["layers"] < 3:
            raise ConfigError(f"{where}: key 'layers' must be at least 3 (presets name layers 1-3)")
        if not item["systems"]:
            raise ConfigError(f"{where}: key 'systems' must name at least the baseline")
        item["systems"] = tuple(item["systems"])
        item["precision"] = tuple(item.get("precision") or ())
        sizings[name] = Sizing(device=DEVICES[name], **item)
    missing = [n for n in ("cpu", "cuda") if n not in sizings]
    if missing:
        raise ConfigError(f"{path}: sizings.{missing[0]} is missing")
    return sizings


@functools.cache
def sizings() -> dict[str, Sizing]:
    """:func:`load_sizings` of the installed ``configs/quickstart.yaml``, read once."""
    return load_sizings()


def sizing_for(cuda: bool) -> Sizing:
    """The GPU sizing when CUDA is available, else the CPU one."""
    return sizings()["cuda" if cuda else "cpu"]
