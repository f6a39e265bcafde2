"""Attention bias metric (Pande et al. 2021 §3.2, eq. 8; Figures 2 and 3).

For head h, query i and a set i′ of keys:

    a_h(i, i′) = (Σ_{j∈i′} α_h[i, j] / |i′|) / (Σ_{j∈T} α_h[i, j] / |T|)

The locality bias of a head takes i′ = L_i, the non-local syntactic bias i′ = S_i
(:mod:`localnmt.analysis.conllu`); each is averaged over the queries of a sentence that have a
non-empty set, then over sentences. Writes ``locality_bias.tsv`` (layer, head, both scores),
``locality_bias_fig2.png`` (fraction of heads above thresholds 1–5) and
``locality_bias_fig3.png`` (heads above threshold 3: blue local, orange syntactic, purple both).
Uses every sentence of the CoNLL-U file unless ``--max-sentences`` says otherwise, and prints
how many sentences, words and subword tokens the scores cover.

    python -m localnmt.analysis.locality_bias --path ckpt.pt --data data-bin \\
        --conllu test.conllu [--bpe test.bpe.en] --out analysis/
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from localnmt.analysis.conllu import RelationSets, piece_spans, read_bpe, read_conllu, relation_sets
from localnmt.errors import DataError, entry_point
from localnmt.progress import track

THRESHOLDS = (1, 2, 3, 4, 5)


def load_model(path: str, data: str) -> tuple[Any, Any]:
    """A trained translation model (eval mode) and its task."""
    from fairseq import checkpoint_utils

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [path], arg_overrides={"data": data}
    )
    model = models[0].eval()
    return model, task


def encoder_attention(model: Any, tokens: Tensor) -> list[Tensor]:
    """Per encoder layer, the ``(H, T, T)`` attention of one sentence ``tokens (T,)``."""
    layers = model.encoder.layers
    for layer in layers:
        layer.self_attn.recording = True
    try:
        with torch.no_grad():
            model.encoder(tokens[None], torch.tensor([tokens.numel()]))
        return [layer.self_attn.last_record.probs[0].float() for layer in layers]
    finally:
        for layer in layers:
            layer.self_attn.recording = False
            layer.self_attn.last_record = None


def bias_score(alpha: Tensor, subset: Tensor, queries: Tensor) -> Tensor:
    """Eq. 8 averaged over the queries with a non-empty subset: ``(H,)``, NaN when none."""
    valid = queries & subset.any(-1)
    if not valid.any():
        return torch.full((alpha.size(0),), float("nan"))
    num = (alpha * subset).sum(-1) / subset.sum(-1).clamp(min=1)
    den = alpha.sum(-1) / alpha.size(-1)
    return (num / den)[:, valid].mean(-1)


def sentence_scores(attention: list[Tensor], sets: RelationSets) -> tuple[Tensor, Tensor]:
    """``(layers, heads)`` locality and syntactic bias of one sentence."""
    local = torch.stack([bias_score(a, sets.local, sets.queries) for a in attention])
    syn = torch.stack([bias_score(a, sets.syntactic, sets.queries) for a in attention])
    return local, syn


def encode(task: Any, words: list[str], bpe: str | None) -> tuple[Tensor, list[list[int]]]:
    """Source token ids (with end-of-sentence) and each word's piece positions."""
    line = bpe if bpe is not None else " ".join(words)
    tokens = task.source_dictionary.encode_line(line, add_if_not_exist=False, append_eos=True)
    return tokens.long(), piece_spans(words, bpe)


@dataclass(frozen=True)
class Coverage:
    """What the averages cover: sentences used (of those in the file), their words and
    subword tokens (without the end-of-sentence token)."""

    sentences: int
    file_sentences: int
    words: int
    tokens: int

    def describe(self, path: str) -> str:
        """One line for the user."""
        return (f"used {self.sentences} of {self.file_sentences} sentences of {path} "
                f"({self.words} words, {self.tokens} subword tokens)")  # fmt: skip


class Treebank:
    """The sentences of a CoNLL-U file (all, or the first ``limit``) as the analyses read them:
    encoded with the model's dictionary (``bpe``: the file of their BPE lines, or None), with
    their relation sets; :meth:`coverage` counts what was read so far."""

    def __init__(self, conllu: str, bpe: str | None = None, limit: int = 0):
        self.every = read_conllu(conllu)
        if not self.every:
            raise ValueError(f"{conllu}: no sentences")
        self.sentences = self.every[: limit or None]
        self.bpe = bpe
        self.used = self.words = self.tokens = 0

    def encoded(self, task: Any) -> Iterator[tuple[Tensor, RelationSets]]:
        """``(token ids, relation sets)`` of each sentence, in file order (a progress bar on a
        terminal: :mod:`localnmt.progress`)."""
        lines = read_bpe(self.bpe, len(self.sentences))
        pairs = zip(self.sentences, lines, strict=True)
        for sentence, line in track(pairs, len(self.sentences), "sentences", "sent"):
            ids, spans = encode(task, sentence.words, line)
            yield ids, relation_sets(sentence, spans, ids.numel())
            self.used += 1
            self.words += len(sentence.words)
            self.tokens += ids.numel() - 1  # without the end-of-sentence token

    def coverage(self) -> Coverage:
        return Coverage(self.used, len(self.every), self.words, self.tokens)


def locality_bias(
    model: Any, task: Any, conllu: str, bpe: str | None = None, limit: int = 0
) -> tuple[Tensor, Tensor, Coverage]:
    """``(locality, syntactic)`` bias, each ``(layers, heads)``, averaged over sentences (all
    of the file, or the first ``limit``), and the :class:`Coverage` of that average."""
    treebank = Treebank(conllu, bpe, limit)
    local_all, syn_all = [], []
    for ids, sets in treebank.encoded(task):
        local, syn = sentence_scores(encoder_attention(model, ids), sets)
        local_all.append(local)
        syn_all.append(syn)
    local, syn = torch.stack(local_all).nanmean(0), torch.stack(syn_all).nanmean(0)
    return local, syn, treebank.coverage()


def fractions_above(scores: Tensor, thresholds=THRESHOLDS) -> list[float]:
    """Figure 2: fraction of heads whose score exceeds each threshold (NaN heads count as no)."""
    flat = torch.nan_to_num(scores.flatten(), nan=0.0)
    return [float((flat > t).float().mean()) for t in thresholds]


def write_outputs(local: Tensor, syn: Tensor, out: Path, threshold: float = 3.0) -> None:
    from localnmt.plotting import pyplot

    plt = pyplot()
    from matplotlib.colors import ListedColormap

    out.mkdir(parents=True, exist_ok=True)
    lines = ["layer\thead\tlocality_bias\tsyntactic_bias"]
    for layer in range(local.size(0)):
        for head in range(local.size(1)):
            lines.append(
                f"{layer + 1}\t{head + 1}\t{local[layer, head]:.4f}\t{syn[layer, head]:.4f}"
            )
    (out / "locality_bias.tsv").write_text("\n".join(lines) + "\n")

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(THRESHOLDS, fractions_above(local), "o-", color="tab:blue", label="locality")
    ax.plot(THRESHOLDS, fractions_above(syn), "o-", color="tab:orange", label="non-local syntactic")
    ax.set_xlabel("threshold")
    ax.set_ylabel("fraction of heads")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "locality_bias_fig2.png", dpi=120)
    plt.close(fig)

    code = (torch.nan_to_num(local) > threshold).int() + 2 * (
        torch.nan_to_num(syn) > threshold
    ).int()
    fig, ax = plt.subplots(figsize=(4, 3))
    cmap = ListedColormap(["white", "tab:blue", "tab:orange", "tab:purple"])
    ax.imshow(code.numpy(), cmap=cmap, vmin=0, vmax=3)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(code.size(1)), [str(h + 1) for h in range(code.size(1))])
    ax.set_yticks(range(code.size(0)), [str(lay + 1) for lay in range(code.size(0))])
    ax.set_title(f"bias > {threshold:g}: local blue, syntactic orange, both purple", fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "locality_bias_fig3.png", dpi=120)
    plt.close(fig)


@entry_point("locality_bias")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localnmt.analysis.locality_bias")
    parser.add_argument("--path", required=True, help="checkpoint of a translation model")
    parser.add_argument("--data", required=True, help="fairseq data-bin (dictionaries)")
    parser.add_argument("--conllu", required=True, help="dependency-parsed source sentences")
    parser.add_argument("--bpe", help="the same sentences after BPE ('@@ ' marker), one a line")
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=0,
        help="use only the first N sentences (default 0: the whole file)",
    )
    parser.add_argument("--threshold", type=float, default=3.0, help="Figure 3 threshold")
    parser.add_argument("--out", default="analysis", help="output folder")
    args = parser.parse_args(argv)
    model, task = load_model(args.path, args.data)
    try:
        local, syn, coverage = locality_bias(model, task, args.conllu, args.bpe, args.max_sentences)
    except ValueError as err:  # an empty CoNLL-U file, a BPE file of another length
        raise DataError(str(err)) from None
    write_outputs(local, syn, Path(args.out), args.threshold)
    print(coverage.describe(args.conllu))
    print((Path(args.out) / "locality_bias.tsv").read_text(), end="")
    for name, scores in (("locality", local), ("syntactic", syn)):
        fracs = ", ".join(f">{t}: {f:.2f}" for t, f in zip(THRESHOLDS, fractions_above(scores)))
        print(f"fraction of heads, {name} bias {fracs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
