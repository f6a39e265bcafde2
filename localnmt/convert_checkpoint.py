"""Load a checkpoint of fairseq's own ``transformer`` into a localnmt architecture.

``python -m localnmt.convert_checkpoint IN.pt OUT.pt --arch localnmt_base [--set KEY=VALUE]``

The parameters are untouched (our attention has fairseq's parameter names), only the recorded
architecture changes; the result loads with ``fairseq-generate --user-dir $(localnmt-path)``
and, with no attention spec, translates exactly as the original.

Where the new architecture or a ``--set`` spec gives layers methods with parameters of their
own (``--set encoder_attn_modifiers='localness[layers=1-3]'``), those parameters are added at
the method's initialisation (drawn with ``--seed``, as a fresh model of that configuration
draws them), so that the result loads and fine-tunes (``fairseq-train --finetune-from-model
OUT.pt``; the optimiser starts afresh). Every other parameter must exist in the source with the
same shape (a method that replaces projections, tied Wq/Wk, cannot start from them: one error).
The result records what was done under ``localnmt_conversion``: the source file and its
sha256, the architecture, the settings, the seed and the parameters initialised.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from localnmt.digests import sha256_file
from localnmt.errors import UsageError, entry_point
from localnmt.provenance import CONVERSION_KEY
from localnmt.safe_load import CheckpointError, load_checkpoint


def _set(ns: Any, key: str, value: Any) -> None:
    if isinstance(ns, dict):
        ns[key] = value
    else:
        setattr(ns, key, value)




def convert(src: Path, dst: Path, arch: str, overrides: dict[str, str] | None = None,
            seed: int = 1) -> list[str]:  # fmt: skip
    """Rewrite the architecture (and optional model args) recorded in a fairseq checkpoint;
    add the parameters of the methods it gives at their initialisation (drawn with ``seed``).
    Returns the names of the parameters added."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    if arch not in ARCH_MODEL_REGISTRY:
        raise UsageError(f"unknown --arch '{arch}'")
    state = load_checkpoint(src)  # weights only: a crafted pickle is refused, not run
    targets = []
    if state.get("args") is not None:
        targets.append(state["args"])
    if state.get("cfg") is not None and state["cfg"].get("model") is not None:
        targets.append(state["cfg"]["model"])
    if not targets:
        raise CheckpointError(f"{src} holds no model configuration (not a fairseq checkpoint?)")
    for ns in targets:
        _set(ns, "arch", arch)
        _set(ns, "_name", arch)
        for key, value in (overrides or {}).items():
            _set(ns, key, value)
    added = _add_method_parameters(state, targets[-1], seed, src)
    state[CONVERSION_KEY] = {
        "source": str(src), "source_sha256": sha256_file(src), "arch": arch,
        "set": dict(overrides or {}), "seed": seed, "initialised": added,
    }  # fmt: skip
    tmp = dst.with_suffix(dst.suffix + ".tmp")
    torch.save(state, tmp)
    tmp.replace(dst)
    return added


def _add_method_parameters(state: dict, model_cfg: Any, seed: int, src: Path) -> list[str]:
    """Build the converted configuration's model (dictionaries of the checkpoint's embedding
    sizes, weights drawn with ``seed``), copy the methods' parameters the checkpoint lacks
    into ``state["model"]``, and return their names; any other difference is one error."""
    import copy
    from types import SimpleNamespace

    from fairseq.models import build_model

    from localnmt.fairseq_plugin.dictionaries import placeholder_dictionary

    weights = state.get("model") or {}
    rows = {side: weights.get(f"{side}.embed_tokens.weight") for side in ("encoder", "decoder")}
    if any(r is None for r in rows.values()):
        return []  # no translation model's embeddings: nothing to build (names unchanged)
    task = SimpleNamespace(
        source_dictionary=placeholder_dictionary(rows["encoder"].size(0)),
        target_dictionary=placeholder_dictionary(rows["decoder"].size(0)),
    )
    torch.manual_seed(seed)
    try:
        fresh = build_model(copy.deepcopy(model_cfg), task).state_dict()
    except Exception as error:  # a --set value the architecture cannot take
        raise CheckpointError(f"{src}: the converted configuration does not build a model: "
                              f"{error}") from None  # fmt: skip
    added = sorted(k for k in fresh if k not in weights and ".modifiers." in k)
    missing = [k for k in fresh if k not in weights and ".modifiers." not in k]
    unexpected = [k for k in weights if k not in fresh]
    shapes = [f"{k} {tuple(weights[k].shape)} -> {tuple(fresh[k].shape)}" for k in fresh
              if k in weights and weights[k].shape != fresh[k].shape]  # fmt: skip
    if missing or unexpected or shapes:
        found = ((missing and f"missing {missing[:3]}")
                 or (unexpected and f"not in the new model {unexpected[:3]}")
                 or f"other shapes {shapes[:2]}")  # fmt: skip
        raise CheckpointError(f"{src}: its parameters do not fit the converted configuration "
                              f"({found}): a method that replaces the attention projections "
                              "(tied_qk) or another model size cannot start from this "
                              "checkpoint")  # fmt: skip
    for key in added:
        weights[key] = fresh[key].to(dtype=_dtype_of(weights, fresh[key].dtype))
    return added


def _dtype_of(weights: dict, default: torch.dtype) -> torch.dtype:
    """The floating dtype the checkpoint's weights are stored in (fp16 checkpoints too)."""
    floating = [t.dtype for t in weights.values() if torch.is_tensor(t) and t.is_floating_point()]
    return floating[0] if floating else default


@entry_point("python -m localnmt.convert_checkpoint")
def main(argv: list[str] | None = None) -> None:
    """Command line: convert, or one message naming the file and exit 2."""
    parser = argparse.ArgumentParser(prog="python -m localnmt.convert_checkpoint")
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--arch", default="localnmt_base")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="also set a model argument, e.g. encoder_attn_modifiers='localness[layers=1-3]' "
        "(the methods' parameters are added at their initialisation)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the added methods' initialisation (default 1, as "
                        "fairseq-train's)")  # fmt: skip
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        if "=" not in item:
            parser.error(f"--set expects KEY=VALUE, got '{item}'")
        key, value = item.split("=", 1)
        overrides[key.replace("-", "_")] = value
    try:
        added = convert(args.src, args.dst, args.arch, overrides, args.seed)
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    print(f"wrote {args.dst} (arch {args.arch})")
    if added:
        print(f"  {len(added)} method parameters initialised (seed {args.seed}), e.g. "
              f"{added[0]}: fine-tune with fairseq-train --finetune-from-model {args.dst}")


if __name__ == "__main__":
    main()
