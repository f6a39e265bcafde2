"""Learned localness windows (Yang et al. 2018, Figures 2 and 3).

Runs a trained model over a dataset with teacher forcing, records the predicted centre P and
window D of every localness layer for every real token and head, dumps them, and draws:

- Figure 2 (``figure2_<site>.png``): the window of each head per layer (the head-specific model
  has one D per head; other windows show each head's mean D);
- Figure 3 (``figure3_<site>.png``): per layer, P against D for a random sample of tokens (top)
  and the histogram of D (bottom).

Usage::

    python -m localnmt.analysis.localness_windows --data DIR --path CKPT --subset valid --out DIR

Outputs in ``--out``: ``windows.npz`` (``<site>.layer<N>.{P,D,length,position,sentence}``; P
and D are ``(tokens, heads)``, layers 1-based), ``summary.json`` (mean D per head and layer) and
the PNGs. ``--format jsonl`` writes ``windows.jsonl`` (one line per token and layer) instead.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from localnmt.errors import entry_point

SITE_TITLES = {
    "encoder_self": "encoder self-attention",
    "decoder_self": "decoder self-attention",
    "cross": "encoder-decoder attention",
}


def localness_modules(model: torch.nn.Module) -> list[Any]:
    """The LocalAttention modules of ``model`` that hold a localness modifier."""
    from localnmt.attention import LocalAttention

    return [
        m
        for m in model.modules()
        if isinstance(m, LocalAttention) and any(x.name == "localness" for x in m.modifiers)
    ]


def _real_queries(sample: dict, kind: str, pad: int) -> torch.Tensor:
    """``(B, Tq)`` bool: real query tokens of this attention site."""
    net = sample["net_input"]
    tokens = net["src_tokens"] if kind == "encoder_self" else net["prev_output_tokens"]
    return tokens.ne(pad)


def collect(model: torch.nn.Module, batches, pad: int) -> dict[str, dict[str, np.ndarray]]:
    """Run ``model`` on each batch and gather P, D per real token, keyed ``<site>.layer<N>``."""
    from localnmt.attention.methods.localness import LocalnessRecord

    modules = localness_modules(model)
    if not modules:
        raise SystemExit("this model has no localness layer: nothing to analyse")
    for module in modules:
        module.recording = True
    parts: dict[str, dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    model.eval()
    try:
        with torch.no_grad():
            for sample in batches:
                if not sample:
                    continue
                net = sample["net_input"]
                model(net["src_tokens"], net["src_lengths"], net["prev_output_tokens"])
                for module in modules:
                    rec = module.last_record
                    scope = None if rec is None else rec.get(LocalnessRecord)
                    if scope is None:
                        continue
                    key = f"{module.site.kind}.layer{module.site.layer + 1}"
                    real = _real_queries(sample, module.site.kind, pad)  # (B, Tq)
                    pos = (real.cumsum(1) - 1).clamp_min(0)
                    length = real.sum(1, keepdim=True).expand_as(real)
                    if module.site.kind == "decoder_self":
                        length = pos + 1  # visible prefix
                    elif module.site.kind == "cross":
                        src_real = net["src_tokens"].ne(pad)
                        length = src_real.sum(1, keepdim=True).expand_as(real)
                    ids = sample["id"][:, None].expand_as(real)
                    sel = real.nonzero(as_tuple=True)
                    parts[key]["P"].append(scope.center.permute(0, 2, 1)[sel].float().numpy())
                    parts[key]["D"].append(scope.window.permute(0, 2, 1)[sel].float().numpy())
                    parts[key]["length"].append(length[sel].numpy())
                    parts[key]["position"].append(pos[sel].numpy())
                    parts[key]["sentence"].append(ids[sel].numpy())
    finally:
        for module in modules:
            module.recording = False
            module.last_record = None
    return {k: {f: np.concatenate(v) for f, v in d.items()} for k, d in parts.items()}


def _layer_keys(data: dict, kind: str) -> list[str]:
    keys = [k for k in data if k.startswith(kind + ".")]
    return sorted(keys, key=lambda k: int(k.split("layer")[1]))


def summary(data: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    return {
        key: {
            "tokens": int(v["D"].shape[0]),
            "mean_D_per_head": v["D"].mean(0).round(4).tolist(),
            "mean_P_over_length": float((v["P"] / np.maximum(v["length"][:, None], 1)).mean()),
        }
        for key, v in data.items()
    }


def plot_figure2(data: dict, kind: str, path: Path) -> None:
    """Window size of each head per layer (one colour per head)."""
    from localnmt.plotting import pyplot

    plt = pyplot()

    keys = _layer_keys(data, kind)
    fig, ax = plt.subplots(figsize=(6, 4))
    heads = data[keys[0]]["D"].shape[1]
    layers = [int(k.split("layer")[1]) for k in keys]
    for h in range(heads):
        ax.plot(layers, [data[k]["D"][:, h].mean() for k in keys], "o", label=f"head {h + 1}")
    ax.set_xlabel("layer")
    ax.set_ylabel("window size D")
    ax.set_xticks(layers)
    ax.set_title(f"Learned window per head ({SITE_TITLES[kind]})")
    ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_figure3(data: dict, kind: str, path: Path, max_points: int = 2000, seed: int = 1) -> None:
    """Per layer: P (y) against D (x) for sampled tokens, and the histogram of D."""
    from localnmt.plotting import pyplot

    plt = pyplot()

    keys = _layer_keys(data, kind)
    rng = np.random.default_rng(seed)
    fig, axes = plt.subplots(2, len(keys), figsize=(3 * len(keys), 5), squeeze=False)
    for col, key in enumerate(keys):
        p, d = data[key]["P"].ravel(), data[key]["D"].ravel()
        pick = rng.choice(p.size, size=min(max_points, p.size), replace=False)
        axes[0, col].scatter(d[pick], p[pick], s=2, c="tab:red", alpha=0.5)
        axes[0, col].set_title(key.split(".")[1])
        axes[0, col].set_xlabel("D")
        axes[1, col].hist(d, bins=30, color="tab:red", alpha=0.7)
        axes[1, col].set_xlabel("D")
    axes[0, 0].set_ylabel("P")
    axes[1, 0].set_ylabel("tokens × heads")
    fig.suptitle(f"Local scopes per layer ({SITE_TITLES[kind]})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(data: dict, out: Path, fmt: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "npz":
        flat = {f"{key}.{field}": arr for key, d in data.items() for field, arr in d.items()}
        np.savez_compressed(out / "windows.npz", **flat)
        return out / "windows.npz"
    path = out / "windows.jsonl"
    with path.open("w") as f:
        for key, d in data.items():
            kind, layer = key.split(".")
            for i in range(d["P"].shape[0]):
                f.write(
                    json.dumps(
                        {
                            "site": kind,
                            "layer": int(layer[5:]),
                            "sentence": int(d["sentence"][i]),
                            "position": int(d["position"][i]),
                            "length": float(d["length"][i]),
                            "P": d["P"][i].round(4).tolist(),
                            "D": d["D"][i].round(4).tolist(),
                        }
                    )
                    + "\n"
                )
    return path


def run(
    data_dir: str,
    checkpoint: str,
    subset: str,
    out: Path,
    *,
    fmt: str = "npz",
    max_sentences: int = 32,
    max_batches: int | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Load ``checkpoint``, analyse ``subset`` of ``data_dir``, write everything to ``out``."""
    from fairseq import checkpoint_utils

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data_dir}
    )
    model = models[0].float().cpu()
    task.load_dataset(subset)
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset, max_sentences=max_sentences, ignore_invalid_inputs=True
    ).next_epoch_itr(shuffle=False)
    batches = (b for i, b in enumerate(itr) if max_batches is None or i < max_batches)
    data = collect(model, batches, task.source_dictionary.pad())
    write(data, out, fmt)
    (out / "summary.json").write_text(json.dumps(summary(data), indent=1) + "\n")
    for kind in SITE_TITLES:
        if _layer_keys(data, kind):
            plot_figure2(data, kind, out / f"figure2_{kind}.png")
            plot_figure3(data, kind, out / f"figure3_{kind}.png")
    return data


@entry_point("localness_windows")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m localnmt.analysis.localness_windows", description=__doc__
    )
    parser.add_argument("--data", required=True, help="binarised data directory")
    parser.add_argument("--path", required=True, help="checkpoint of a model with localness")
    parser.add_argument("--subset", default="valid")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--format", choices=("npz", "jsonl"), default="npz")
    parser.add_argument("--max-sentences", type=int, default=32, help="sentences per batch")
    parser.add_argument("--max-batches", type=int, default=None)
    args = parser.parse_args(argv)
    data = run(
        args.data,
        args.path,
        args.subset,
        args.out,
        fmt=args.format,
        max_sentences=args.max_sentences,
        max_batches=args.max_batches,
    )
    for key, info in summary(data).items():
        print(key, info["tokens"], "tokens, mean D per head:", info["mean_D_per_head"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
