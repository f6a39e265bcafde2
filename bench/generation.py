"""Beam-search speed with fairseq's ``SequenceGenerator``: a row's model vs the baseline.

Random weights are fine as long as both models run the same number of decoder steps: the
generator gets ``max_len_a=0, max_len_b=N, min_len=N`` so EOS is masked until step N and
forced at step N, whatever the scores.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch
from torch import nn

from bench.measure import interleaved, median_ratio
from bench.synthetic import Batch
from bench.training_throughput import autocast


class Generator:
    """A model in eval mode and a fixed-length beam search over one batch."""

    def __init__(
        self,
        model: nn.Module,
        dictionary,
        device: torch.device,
        dtype: torch.dtype,
        *,
        beam: int,
        steps: int,
    ):
        from fairseq.sequence_generator import SequenceGenerator

        self.model = model.to(device).eval()
        # as fairseq-generate's prepare_for_inference_ (need_attn = --print-alignment, off): a
        # decoder layer computes cross-attention weights only where the decoder asks for the
        # alignment layer's; without it every layer in eval mode returns them (set here, not
        # by make_generation_fast_, which would forbid training the same model afterwards)
        for module in self.model.modules():
            if hasattr(module, "need_attn"):
                module.need_attn = False
        self.device = device
        self.dtype = dtype
        self.generator = SequenceGenerator(
            [self.model],
            dictionary,
            beam_size=beam,
            max_len_a=0,
            max_len_b=steps,
            min_len=steps,
        )

    def run(self, batch: Batch) -> list:
        if self.model.training:  # the same model is also trained (train mode)
            self.model.eval()
        sample = {"net_input": batch.net_input()}
        with torch.no_grad(), autocast(self.device, self.dtype):
            return self.generator.generate([self.model], sample)


def compare_generation(
    baseline: Generator, candidate: Generator, batch: Batch, *, warmup: int, repeats: int
) -> dict[str, Any]:
    """Sentences/s of both (median over repeats) and their median paired ratio."""
    times = interleaved(
        {"baseline": lambda: baseline.run(batch), "candidate": lambda: candidate.run(batch)},
        baseline.device,
        warmup=warmup,
        repeats=repeats,
    )
    sentences = int(batch.src_tokens.size(0))
    hyp_lengths = {len(h[0]["tokens"]) for h in candidate.run(batch)}
    return {
        "sentences": sentences,
        "output_tokens": sorted(hyp_lengths),
        "baseline_sentences_per_s": sentences / statistics.median(times["baseline"]),
        "candidate_sentences_per_s": sentences / statistics.median(times["candidate"]),
        "speed_ratio": median_ratio(times["baseline"], times["candidate"]),
        "baseline_seconds": times["baseline"],
        "candidate_seconds": times["candidate"],
    }
