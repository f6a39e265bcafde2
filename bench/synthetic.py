"""Synthetic data with no files (the idea of fairseq's ``--task dummy_mt``): a joined
dictionary of ``vocab`` symbols and batches of random tokens with realistic padding."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def make_dictionary(vocab: int):
    """A fairseq ``Dictionary`` with ``vocab`` symbols in all (4 special ones included)."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for i in range(vocab - len(dictionary)):
        dictionary.add_symbol(f"w{i}")
    return dictionary


@dataclass
class Batch:
    """One translation batch as fairseq's ``LanguagePairDataset`` collates it: source
    left-padded and ending with EOS, target right-padded, ``prev_output_tokens`` = EOS +
    target shifted right."""

    src_tokens: Tensor
    src_lengths: Tensor
    prev_output_tokens: Tensor
    target: Tensor
    pad: int = 1

    @property
    def target_tokens(self) -> int:
        return int(self.target.ne(self.pad).sum())

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.src_tokens.to(device),
            self.src_lengths.to(device),
            self.prev_output_tokens.to(device),
            self.target.to(device),
            self.pad,
        )

    def net_input(self) -> dict[str, Tensor]:
        return {"src_tokens": self.src_tokens, "src_lengths": self.src_lengths}


def random_lengths(batch: int, length: int, jitter: float, gen: torch.Generator) -> Tensor:
    """Lengths in ``[ceil((1 - jitter)·length), length]``; the first one is ``length``."""
    low = max(1, length - int(jitter * length))
    lengths = torch.randint(low, length + 1, (batch,), generator=gen)
    lengths[0] = length
    return lengths


def make_batch(dictionary, batch: int, length: int, *, jitter: float = 0.1, seed: int = 0) -> Batch:
    """``batch`` sentence pairs of at most ``length`` tokens (EOS included) each side."""
    gen = torch.Generator().manual_seed(seed)
    pad, eos, first = dictionary.pad(), dictionary.eos(), dictionary.nspecial
    vocab = len(dictionary)
    src_len = random_lengths(batch, length, jitter, gen)
    tgt_len = random_lengths(batch, length, jitter, gen)
    src = torch.full((batch, length), pad, dtype=torch.long)
    tgt = torch.full((batch, length), pad, dtype=torch.long)
    prev = torch.full((batch, length), pad, dtype=torch.long)
    for i in range(batch):
        s, t = int(src_len[i]), int(tgt_len[i])
        words = torch.randint(first, vocab, (s,), generator=gen)
        words[-1] = eos
        src[i, length - s :] = words  # left padding (fairseq's default for the source)
        words = torch.randint(first, vocab, (t,), generator=gen)
        words[-1] = eos
        tgt[i, :t] = words
        prev[i, 0] = eos
        prev[i, 1:t] = words[:-1]
    return Batch(src, src_len, prev, tgt, pad)


def batch_size_for(max_tokens: int, length: int) -> int:
    """Sentences per batch so that a batch holds about ``max_tokens`` target tokens."""
    return max(1, max_tokens // length)
