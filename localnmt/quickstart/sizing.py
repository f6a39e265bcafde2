"""How big the quickstart's models are, per device, and which systems it compares.

A sizing names a training recipe of ``configs/recipes.yaml`` and the fields it changes
(``overrides``), plus what only the quickstart needs: the corpus's BPE merges, the default
budget and the systems. The CPU sizing is the ``cpu`` recipe as it is (a small model that
makes many updates on a 2-core CPU: the sweep behind it is in ``docs/quickstart.md``); the
GPU sizing is the ``base`` recipe with a shorter warm-up, fp16 and more systems; ``tiny`` is
for smoke tests. The quickstart picks ``cuda`` when torch sees a GPU, else ``cpu``. The
numbers are data, in ``configs/quickstart.yaml``, read on first use (a broken file is one
error, exit 2). Presets that name layers 1–3 (Localness, CSAN) need at least three encoder
layers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localnmt import config_files
from localnmt.config_files import Key
from localnmt.errors import ConfigError
from localnmt.runs.recipes import RECIPE_KEYS, Recipe, effective_recipe, translation_recipes

#: the sizings there are, and the device each is for
DEVICES = {"cpu": "cpu", "cuda": "cuda", "tiny": "cpu"}
BASELINE = "vaswani2017/table-3/transformer-base/base"


@dataclass(frozen=True)
class Sizing:
    """A recipe with some fields changed, and the quickstart's own settings for a device."""

    name: str  # cpu, cuda or tiny
    recipe: str
    overrides: tuple[tuple[str, Any], ...]
    bpe_merges: int
    budget_minutes: float
    systems: tuple[str, ...]
    precision: str | None = None

    @property
    def device(self) -> str:
        """``cpu`` or ``cuda``."""
        return DEVICES[self.name]

    def effective(self) -> Recipe:
        """The recipe with this sizing's overrides."""
        return effective_recipe(self.recipe, self.overrides)

    def describe(self) -> str:
        """One line for logs and the report."""
        r = self.effective()
        if r.dims is None:
            model = "the architecture's own dimensions"
        else:
            embed, ffn, heads, layers = r.dims
            model = (f"{embed}-dim {layers}+{layers}-layer Transformer ({heads} heads, "
                     f"FFN {ffn})")  # fmt: skip
        return (
            f"{model}, {self.bpe_merges} BPE merges, {r.max_tokens}-token batches, lr {r.lr:g}, "
            f"{r.warmup} warm-up updates, dropout {r.dropout:g}"
            f"{', ' + self.precision if self.precision else ''} (recipe {self.recipe}"
            f"{' with ' + ', '.join(k for k, _ in self.overrides) if self.overrides else ''})"
        )


SIZING_KEYS = {
    "recipe": Key(str, required=True),
    "overrides": Key(dict),
    "precision": Key(str, choices=("fp16", "bf16")),
    "bpe_merges": Key(int, required=True),
    "budget_minutes": Key(float, required=True),
    "systems": Key(list, required=True, items=str),
}
#: what a sizing's ``overrides`` may set: any recipe field, typed as in configs/recipes.yaml
OVERRIDE_KEYS = {k: Key(v.types, items=v.items) for k, v in RECIPE_KEYS.items()}


def load_sizings(path: Path | str | None = None) -> dict[str, Sizing]:
    """The sizings of ``configs/quickstart.yaml`` (or ``path``), checked: an unknown, missing
    or mistyped key (of the sizing or of its overrides), or an unknown recipe, is one
    :class:`~localnmt.errors.ConfigError` naming file and key."""
    path = Path(path) if path is not None else config_files.config_dir() / "quickstart.yaml"
    data = config_files.check(config_files.read_yaml(path),
                              {"sizings": Key(dict, required=True)}, str(path))  # fmt: skip
    sizings = {}
    for name, raw in data["sizings"].items():
        where = f"{path}: sizings.{name}"
        if name not in DEVICES:
            raise ConfigError(f"{where}: unknown sizing (valid: {', '.join(DEVICES)})")
        item = config_files.check(raw, SIZING_KEYS, where)
        overrides = config_files.check(item.get("overrides") or {}, OVERRIDE_KEYS,
                                       f"{where}.overrides")  # fmt: skip
        known = translation_recipes()
        if item["recipe"] not in known:
            raise ConfigError(f"{where}: key 'recipe': unknown recipe {item['recipe']!r} "
                              f"(configs/recipes.yaml has {', '.join(known)})")  # fmt: skip
        if not item["systems"]:
            raise ConfigError(f"{where}: key 'systems' must name at least the baseline")
        sizing = Sizing(
            name=name, recipe=item["recipe"], overrides=tuple(overrides.items()),
            bpe_merges=item["bpe_merges"], budget_minutes=item["budget_minutes"],
            systems=tuple(item["systems"]), precision=item.get("precision"),
        )  # fmt: skip
        dims = sizing.effective().dims
        if dims is not None and dims[3] < 3:
            raise ConfigError(f"{where}: the model needs at least 3 layers (presets name "
                              f"layers 1-3), got {dims[3]}")  # fmt: skip
        sizings[name] = sizing
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
