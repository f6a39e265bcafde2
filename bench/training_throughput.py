"""Training throughput and peak memory of a catalog row's model vs fairseq's Transformer.

One step = forward, label-smoothed cross-entropy (0.1, summed over target tokens), backward,
Adam step, as ``fairseq-train`` does (without its data loading). Both models see the same
batch; steps are timed A/B interleaved after warm-up (:func:`bench.measure.interleaved`).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.measure import interleaved, median_ratio, peak_memory
from bench.synthetic import Batch


def autocast(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """Mixed precision for ``float16`` / ``bfloat16``; nothing for ``float32``."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, enabled: bool) -> Any:
    """Loss scaling for float16: ``torch.amp.GradScaler`` (torch >= 2.3), else the CUDA one
    (a disabled scaler does nothing on any device)."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device.type, enabled=enabled)
    if enabled and device.type != "cuda":
        raise RuntimeError(
            f"float16 training on {device.type} needs torch >= 2.3 (this is {torch.__version__})"
        )
    return torch.cuda.amp.GradScaler(enabled=enabled)


class Trainer:
    """A model, its Adam optimizer and one synthetic training step."""

    def __init__(
        self, model: nn.Module, device: torch.device, dtype: torch.dtype, lr: float = 1e-4
    ):
        self.model = model.to(device).train()
        self.device = device
        self.dtype = dtype
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
        self.scaler = grad_scaler(device, enabled=dtype == torch.float16)

    def step(self, batch: Batch) -> float:
        if not self.model.training:  # the same model also runs beam search (eval mode)
            self.model.train()
        with autocast(self.device, self.dtype):
            logits, _ = self.model(batch.src_tokens, batch.src_lengths, batch.prev_output_tokens)
        loss = F.cross_entropy(
            logits.float().view(-1, logits.size(-1)),
            batch.target.view(-1),
            ignore_index=batch.pad,
            label_smoothing=0.1,
            reduction="sum",
        )
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    def stepper(self, batch: Batch) -> Callable[[], float]:
        return lambda: self.step(batch)


def compare_training(
    baseline: Trainer,
    candidate: Trainer,
    batch: Batch,
    *,
    warmup: int,
    repeats: int,
    memory: bool = True,
) -> dict[str, Any]:
    """Target tokens/s of both (median over repeats), their median paired ratio, and peak
    memory of one step of each (after the timed steps)."""
    device = baseline.device
    times = interleaved(
        {"baseline": baseline.stepper(batch), "candidate": candidate.stepper(batch)},
        device,
        warmup=warmup,
        repeats=repeats,
    )
    tokens = batch.target_tokens
    result: dict[str, Any] = {
        "batch_sentences": int(batch.target.size(0)),
        "target_tokens": tokens,
        "baseline_tokens_per_s": tokens / statistics.median(times["baseline"]),
        "candidate_tokens_per_s": tokens / statistics.median(times["candidate"]),
        # candidate throughput / baseline throughput = baseline time / candidate time
        "throughput_ratio": median_ratio(times["baseline"], times["candidate"]),
        "baseline_seconds": times["baseline"],
        "candidate_seconds": times["candidate"],
    }
    if memory:
        result["baseline_peak_bytes"] = peak_memory(baseline.stepper(batch), device)
        result["candidate_peak_bytes"] = peak_memory(candidate.stepper(batch), device)
        result["memory_ratio"] = result["candidate_peak_bytes"] / max(
            1, result["baseline_peak_bytes"]
        )
    return result
