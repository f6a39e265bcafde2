"""Training hyper-parameters of the papers as fairseq-train arguments.

The numbers are data, in ``configs/recipes.yaml`` (read and checked when first asked for,
so a broken file is one error of the command that needs it; its comments say where each
number comes from): the translation recipes ``base``, ``big`` (Vaswani et al. 2017, the
papers' setting), ``cpu`` (the quickstart on a CPU) and ``tiny`` (smoke tests), from
:func:`translation_recipes` / :func:`get_recipe`, and the BERT recipes of Pande et al. (2021)
Table 4 from :func:`glue_finetune_recipe` and :func:`roberta_pretrain_recipe`. Embeddings
are shared (joined dictionary; ``separate_vocab``: separate source/target dictionaries, e.g.
WMT17 Zh-En, share only the decoder's input and output embeddings). ``tokens_per_update``
sets another batch than 8 x 4096 tokens (Pande et al.'s En-Ru: 25K).

``tiny`` and ``cpu`` shrink the model through CLI overrides of the arch's dimensions, so any
``--arch`` (plain fairseq or a localnmt preset) can be smoke-tested on a laptop. A run may
replace some fields of its recipe (:func:`effective_recipe`: the quickstart's sizings name a
recipe and the fields they change).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from localnmt import config_files
from localnmt.batching import PAPER_TOKENS_PER_UPDATE, update_freq
from localnmt.errors import ConfigError, UsageError

Key = config_files.Key


@dataclass(frozen=True)
class Recipe:
    """One translation recipe; ``dims`` are (embed, ffn, heads, layers) or None for the arch's.
    Every field is a key of ``recipes`` (or ``defaults``) in configs/recipes.yaml."""

    lr: float
    dropout: float
    warmup: int
    max_update: int
    max_tokens: int
    average_last: int
    save_interval_updates: int
    keep_last: int
    scale_batch: bool
    dims: tuple[int, int, int, int] | None
    extra: tuple[str, ...]
    adam_betas: str
    adam_eps: float
    clip_norm: float
    weight_decay: float
    warmup_init_lr: float
    label_smoothing: float
    log_interval: int


@dataclass(frozen=True)
class BertOptimisation:
    """What the BERT recipes share: regularisation and the Adam / LAMB settings."""

    weight_decay: float
    clip_norm: float
    dropout: float
    attention_dropout: float
    adam_betas: str
    adam_eps: float
    lamb_betas: str
    lamb_eps: float


@dataclass(frozen=True)
class FinetuneRecipe(BertOptimisation):
    """Fine-tuning a BERT on one GLUE task (configs/recipes.yaml, ``glue_finetune``);
    ``grid`` holds the (batch size, lr) settings the paper searches."""

    lr: float
    batch_size: int
    grid: tuple[tuple[int, float], ...]
    warmup: int
    max_epoch: int


@dataclass(frozen=True)
class PretrainRecipe(BertOptimisation):
    """Masked-LM pre-training of a BERT in two phases (configs/recipes.yaml,
    ``roberta_pretrain``); a phase's warm-up is ``max_warmup`` updates, or a tenth of its
    updates when it has fewer than ``max_warmup``."""

    lr: float
    batch_per_gpu: int
    sequences_per_update: int
    phase1_updates: int
    phase1_tokens_per_sample: int
    phase2_updates: int
    phase2_tokens_per_sample: int
    max_warmup: int


#: Keys of configs/recipes.yaml, and of each of its sections (each section's from its dataclass).
FILE_KEYS = {
    name: Key(dict, required=True)
    for name in ("defaults", "recipes", "glue_finetune", "roberta_pretrain")
}
RECIPE_KEYS: dict[str, Key] = config_files.keys_of(Recipe)
FINETUNE_KEYS: dict[str, Key] = config_files.keys_of(FinetuneRecipe)
PRETRAIN_KEYS: dict[str, Key] = config_files.keys_of(PretrainRecipe)


def recipes_path() -> Path:
    """configs/recipes.yaml (see :func:`localnmt.config_files.config_dir`)."""
    return config_files.config_dir() / "recipes.yaml"


def load_recipes(
    path: Path | str | None = None,
) -> tuple[dict[str, Recipe], FinetuneRecipe, PretrainRecipe]:
    """The recipes of ``path`` (default configs/recipes.yaml), checked: an unknown, missing or
    mistyped key is one :class:`~localnmt.config_files.ConfigError` naming file and key."""
    path = Path(path) if path is not None else recipes_path()
    data = config_files.check(config_files.read_yaml(path), FILE_KEYS, str(path))
    optional = {k: Key(v.types, items=v.items) for k, v in RECIPE_KEYS.items()}
    defaults = config_files.check(data["defaults"], optional, f"{path}: defaults")
    recipes = {}
    for name, raw in data["recipes"].items():
        where = f"{path}: recipes.{name}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
        item = config_files.check({**defaults, **raw}, RECIPE_KEYS, where)
        if item["dims"] is not None and len(item["dims"]) != 4:
            raise ConfigError(
                f"{where}: key 'dims' must be [embed, ffn, heads, layers], got {item['dims']}"
            )
        item["dims"] = None if item["dims"] is None else tuple(item["dims"])
        item["extra"] = tuple(item["extra"])
        recipes[str(name)] = Recipe(**item)
    where = f"{path}: glue_finetune"
    finetune = config_files.check(data["glue_finetune"], FINETUNE_KEYS, where)
    finetune["grid"] = tuple(_setting(s, f"{where}: key 'grid', item {i}")
                             for i, s in enumerate(finetune["grid"]))  # fmt: skip
    where = f"{path}: roberta_pretrain"
    pretrain = config_files.check(data["roberta_pretrain"], PRETRAIN_KEYS, where)
    return recipes, FinetuneRecipe(**finetune), PretrainRecipe(**pretrain)


def _setting(item: Any, where: str) -> tuple[int, float]:
    ok = (
        len(item) == 2
        and isinstance(item[0], int)
        and not isinstance(item[0], bool)
        and isinstance(item[1], (int, float))
        and not isinstance(item[1], bool)
    )
    if not ok:
        raise ConfigError(f"{where}: must be [batch size, learning rate], got {item!r}")
    return int(item[0]), float(item[1])


@functools.cache
def _installed() -> tuple[dict[str, Recipe], FinetuneRecipe, PretrainRecipe]:
    return load_recipes()


def translation_recipes() -> dict[str, Recipe]:
    """The translation recipes of the installed configs/recipes.yaml, read once."""
    return _installed()[0]


def glue_finetune_recipe() -> FinetuneRecipe:
    """Pande et al. Table 4's fine-tuning recipe (configs/recipes.yaml ``glue_finetune``)."""
    return _installed()[1]


def roberta_pretrain_recipe() -> PretrainRecipe:
    """Pande et al. 5.1's pre-training recipe (configs/recipes.yaml ``roberta_pretrain``)."""
    return _installed()[2]


def get_recipe(name: str) -> Recipe:
    """The translation recipe ``name``; an unknown name is a :class:`UsageError` naming the
    recipes there are."""
    recipes = translation_recipes()
    if name not in recipes:
        raise UsageError(f"unknown recipe (--size) {name!r}; choose from {', '.join(recipes)}")
    return recipes[name]


#: recipe fields a run may replace, and the types their values must have
OVERRIDABLE = {f.name: f.type for f in fields(Recipe)}


def effective_recipe(name: str, overrides: Iterable[tuple[str, object]] = ()) -> Recipe:
    """Recipe ``name`` with some fields replaced (``overrides``: (field, value) pairs)."""
    changes = dict(overrides)
    unknown = sorted(set(changes) - set(OVERRIDABLE))
    if unknown:
        raise ConfigError(f"unknown recipe field(s) {', '.join(unknown)} "
                          f"(valid: {', '.join(OVERRIDABLE)})")  # fmt: skip
    if "dims" in changes and changes["dims"] is not None:
        changes["dims"] = tuple(changes["dims"])  # type: ignore[arg-type]
    if "extra" in changes:
        changes["extra"] = tuple(changes["extra"])  # type: ignore[arg-type]
    return replace(get_recipe(name), **changes)


def lr_text(lr: float) -> str:
    """A learning rate as the BERT commands write it: the shortest digits in scientific
    notation without padding (1.0e-4 -> ``1e-4``, 1.5e-4 -> ``1.5e-4``)."""
    return f"{Decimal(repr(lr)).normalize():e}"


def dim_overrides(embed: int, ffn: int, heads: int, layers: int) -> list[str]:
    """fairseq CLI overrides shrinking encoder and decoder to the given dimensions."""
    args: list[str] = []
    for side in ("encoder", "decoder"):
        args += [
            f"--{side}-embed-dim",
            str(embed),
            f"--{side}-ffn-embed-dim",
            str(ffn),
            f"--{side}-attention-heads",
            str(heads),
            f"--{side}-layers",
            str(layers),
        ]
    return args


def train_args(
    recipe: str | Recipe,
    world_size: int = 1,
    max_tokens: int | None = None,
    max_update: int | None = None,
    layers: int | None = None,
    tokens_per_update: int | None = None,
    separate_vocab: bool = False,
) -> list[str]:
    """fairseq-train arguments (without data, arch, save dir) for one recipe (a name of
    configs/recipes.yaml or a :class:`Recipe`)."""
    if isinstance(recipe, str):
        recipe = get_recipe(recipe)
    tokens = max_tokens or recipe.max_tokens
    target = tokens_per_update or PAPER_TOKENS_PER_UPDATE
    freq = update_freq(world_size, tokens, target) if recipe.scale_batch else 1
    args = [
        "--share-decoder-input-output-embed" if separate_vocab else "--share-all-embeddings",
        "--optimizer",
        "adam",
        "--adam-betas",
        recipe.adam_betas,
        "--adam-eps",
        str(recipe.adam_eps),
        "--clip-norm",
        str(recipe.clip_norm),
        "--weight-decay",
        str(recipe.weight_decay),
        "--lr",
        str(recipe.lr),
        "--lr-scheduler",
        "inverse_sqrt",
        "--warmup-updates",
        str(recipe.warmup),
        "--warmup-init-lr",
        str(recipe.warmup_init_lr),
        "--dropout",
        str(recipe.dropout),
        "--criterion",
        "label_smoothed_cross_entropy",
        "--label-smoothing",
        str(recipe.label_smoothing),
        "--max-tokens",
        str(tokens),
        "--update-freq",
        str(freq),
        "--max-update",
        str(max_update or recipe.max_update),
        "--log-format",
        "simple",
        "--log-interval",
        str(recipe.log_interval),
        "--no-progress-bar",
    ]
    if recipe.save_interval_updates:
        args += [
            "--save-interval-updates",
            str(recipe.save_interval_updates),
            "--keep-interval-updates",
            str(recipe.keep_last),
            "--no-epoch-checkpoints",
        ]
    else:
        args += ["--keep-last-epochs", str(recipe.keep_last)]
    if recipe.dims is not None:
        embed, ffn, heads, n_layers = recipe.dims
        args += dim_overrides(embed, ffn, heads, n_layers if layers is None else layers)
    elif layers is not None:
        args += ["--encoder-layers", str(layers), "--decoder-layers", str(layers)]
    return args + list(recipe.extra)
