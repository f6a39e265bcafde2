"""CoNLL-U dependency parses, mapped to model positions (Pande et al. 2021 §3.1–3.2).

The analyses need, for every model position ``i``, three disjoint sets of positions:

    L_i  local: |i − j| ≤ 2 (the paper's [i−2, i+2], i itself included)
    S_i  syntactic, not local: j's word and i's word are linked by a dependency arc
         (head ↔ dependent, either direction), and j ∉ L_i
    U_i  unrelated: neither

Mapping words to positions (the paper leaves it open): a word's relations apply to ALL its BPE
pieces (piece p of word a is related to every piece of word b when a–b is an arc). Pieces of
one word are not related to each other by syntax (they are usually local anyway). The
end-of-sentence token the encoder appends is a position (it counts in L_j of its neighbours and
in the denominator of eq. 8) but never a query ``i``. Multi-word token lines (``3-4``) and
empty nodes (``5.1``) are skipped: relations are between syntactic words. Tokens are the
CoNLL-U forms; a BPE file (subword-nmt ``@@`` continuation marker) aligned line by line with
the sentences says how each form is split (one piece per form when none is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from localnmt.evaluation.scoring import read_lines

LOCAL_WINDOW = 2


@dataclass
class Sentence:
    """One parsed sentence: forms and 0-based heads (``-1`` = root)."""

    words: list[str]
    heads: list[int]
    deprels: list[str]

    def arcs(self) -> set[tuple[int, int]]:
        """Word pairs linked by an arc, both directions."""
        pairs = set()
        for dep, head in enumerate(self.heads):
            if head >= 0:
                pairs.add((dep, head))
                pairs.add((head, dep))
        return pairs


def read_conllu(path: str | Path) -> list[Sentence]:
    """Sentences of a CoNLL-U file (10 tab-separated columns; ``#`` comments)."""
    sentences: list[Sentence] = []
    words: list[str] = []
    heads: list[int] = []
    rels: list[str] = []
    for line in [*read_lines(path), ""]:
        line = line.rstrip("\n")
        if not line.strip():
            if words:
                sentences.append(Sentence(words, heads, rels))
            words, heads, rels = [], [], []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ValueError(f"{path}: CoNLL-U lines have 10 tab-separated columns: {line!r}")
        if "-" in cols[0] or "." in cols[0]:
            continue  # multi-word token range or empty node
        if int(cols[0]) != len(words) + 1:
            raise ValueError(f"{path}: word ids must count 1, 2, ...: {line!r}")
        words.append(cols[1])
        heads.append(int(cols[6]) - 1)
        rels.append(cols[7])
    return sentences


def piece_spans(
    words: list[str], bpe_line: str | None = None, marker: str = "@@"
) -> list[list[int]]:
    """Model positions of each word's pieces; checks that the pieces spell the words."""
    if bpe_line is None:
        return [[i] for i in range(len(words))]
    spans: list[list[int]] = []
    current: list[int] = []
    text = ""
    for pos, piece in enumerate(bpe_line.split()):
        current.append(pos)
        if piece.endswith(marker):
            text += piece[: -len(marker)]
            continue
        text += piece
        spans.append(current)
        if len(spans) > len(words) or text != words[len(spans) - 1]:
            raise ValueError(f"BPE line does not match the words near '{text}': {bpe_line!r}")
        current, text = [], ""
    if len(spans) != len(words):
        raise ValueError(f"BPE line has {len(spans)} words, CoNLL-U has {len(words)}")
    return spans


@dataclass
class RelationSets:
    """Boolean ``(T, T)`` matrices ``[i, j]`` of L, S and U, and the query positions."""

    local: Tensor
    syntactic: Tensor
    unrelated: Tensor
    queries: Tensor  # (T,) True at word pieces (not at the appended end-of-sentence)


def relation_sets(
    sentence: Sentence, spans: list[list[int]], length: int, window: int = LOCAL_WINDOW
) -> RelationSets:
    """L, S, U over ``length`` model positions (word pieces, then end-of-sentence)."""
    idx = torch.arange(length)
    local = (idx[:, None] - idx[None, :]).abs() <= window
    related = torch.zeros(length, length, dtype=torch.bool)
    for a, b in sentence.arcs():
        for i in spans[a]:
            for j in spans[b]:
                related[i, j] = True
    syntactic = related & ~local
    unrelated = ~local & ~syntactic
    queries = torch.zeros(length, dtype=torch.bool)
    queries[[p for span in spans for p in span]] = True
    return RelationSets(local, syntactic, unrelated, queries)


def read_bpe(path: str | Path | None, count: int) -> list[str | None]:
    """Lines of a BPE file (or ``None`` per sentence when there is none)."""
    if path is None:
        return [None] * count
    lines = read_lines(path)
    if len(lines) < count:
        raise ValueError(f"{path}: {len(lines)} lines for {count} CoNLL-U sentences")
    return lines[:count]
