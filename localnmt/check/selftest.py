"""The self-test: every method against the reference path, decoding step by step against the
full pass, and a few training updates of a tiny model per method."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from localnmt.attention import dispatch
from localnmt.check.check_results import FAIL, PASS, SKIP, CheckResult
from localnmt.check.layer_runs import (
    LOW_PRECISION_TOLERANCE,
    compare_with_float32,
    make_attention,
    padded_batch,
    run_layer,
)
from localnmt.check.tiny_model import build_tiny_model, dictionary, reversal_batch, train_updates

#: float32 kernels against the float32 reference path: the same numbers up to rounding (C
#: loops, fused SDPA, FlexAttention sum in other orders), relative as in compare_with_float32.
FLOAT32_TOLERANCE = 1e-4
#: step-by-step decoding against the full pass (float32, relative to the largest output).
INCREMENTAL_TOLERANCE = 1e-5
#: a falling loss: the last of the updates at most this fraction of the first.
LOSS_FALL = 0.9


def low_precision_dtypes(device: torch.device) -> list[torch.dtype]:
    """float16 and bfloat16 where this device computes them (the CPU does both)."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return [torch.float16]
    return [torch.float16, torch.bfloat16]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _timed(fn: Callable[[], CheckResult]) -> CheckResult:
    start = time.perf_counter()
    try:
        result = fn()
    except Exception as err:  # a check that crashes has failed: say how, and go on
        result = CheckResult("", "", FAIL, f"{type(err).__name__}: {err}"[:300], 0.0)
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def forward_backward(
    site: str,
    spec: str,
    dtypes: list[torch.dtype],
    device: torch.device,
    length: int,
    low_against_same_dtype: bool = False,
) -> list[CheckResult]:
    """The layer of ``spec`` through the kernels and through the dense path, in each dtype,
    against the float32 reference path (dense attention and the methods' torch ops): outputs
    at real queries and every gradient (16 dims, 4 heads, 5 sentences of mixed padding).

    ``low_against_same_dtype`` (long sequences): float16 / bfloat16 kernels against the
    reference path in the same dtype. Over hundreds of tokens some methods are themselves
    ill-conditioned in low precision (LOCAL_HARD's centre (I − 1)·sigmoid(·) moves a hard
    window's edge, the synthesis network's mean is a running sum), which the same-dtype
    reference shares, so the comparison isolates the kernels."""
    att = make_attention(site, spec, embed_dim=16, heads=4, train=True)
    batch = padded_batch(site, length, 16, device=device)
    float32_reference = run_layer(att, batch, torch.float32, need_weights=True, reference=True)
    results = []
    for dtype in dtypes:
        low = dtype != torch.float32
        same_dtype = low and low_against_same_dtype
        name = f"{site}:{spec or 'plain'} T={length} {_dtype_name(dtype)}"
        tolerance = LOW_PRECISION_TOLERANCE[dtype] if low else FLOAT32_TOLERANCE

        def check(dtype=dtype, same_dtype=same_dtype, tolerance=tolerance) -> CheckResult:
            reference = float32_reference
            paths = (("kernels", False), ("dense", True))
            if same_dtype:
                reference = run_layer(att, batch, dtype, need_weights=True, reference=True)
                paths = (("kernels", False),)
            parts, ok = [], True
            for label, need_weights in paths:
                with dispatch.trace() as seen:
                    run = run_layer(att, batch, dtype, need_weights)
                got = compare_with_float32(reference, run, batch.real_queries)
                ok &= got.finite and got.error <= tolerance
                ran = "+".join(dict.fromkeys(seen.kernels()))
                finite = "" if got.finite else ", NOT FINITE"
                parts.append(f"{label} [{ran}] {got.error:.1e} at {got.worst}{finite}")
            against = f"reference in {_dtype_name(dtype)}" if same_dtype else "float32 reference"
            detail = f"{'; '.join(parts)} (vs {against}, tolerance {tolerance:g})"
            return CheckResult("forward/backward", "", PASS if ok else FAIL, detail, 0.0)

        result = _timed(check)
        result.section, result.name = "forward/backward", name
        results.append(result)
    return results


def incremental(site: str, spec: str, device: torch.device, length: int = 7) -> CheckResult:
    """Decoding one step at a time with fairseq's incremental state equals the full pass
    (float32, eval mode): decoder self-attention under the causal mask, cross-attention over a
    padded source."""
    name = f"{site}:{spec or 'plain'} T={length}"

    def check() -> CheckResult:
        att = make_attention(site, spec, embed_dim=16, heads=4).to(device)
        batch = padded_batch(site, length, 16, device=device)
        x, key = batch.query, batch.key
        state: dict = {}
        with torch.no_grad():
            if site == "cross":
                pad = batch.key_padding_mask
                full, _ = att(x, key, key, key_padding_mask=pad)
                steps = [att(x[t : t + 1], key, key, key_padding_mask=pad, incremental_state=state,
                             static_kv=True)[0] for t in range(length)]  # fmt: skip
            else:
                full, _ = att(x, x, x, attn_mask=batch.attn_mask)
                steps = [att(x[t : t + 1], x[t : t + 1], x[t : t + 1], incremental_state=state)[0]
                         for t in range(length)]  # fmt: skip
        error = float((torch.cat(steps) - full).abs().max() / full.abs().max().clamp(min=1e-30))
        ok = math.isfinite(error) and error <= INCREMENTAL_TOLERANCE
        detail = f"steps vs full pass {error:.1e} (tolerance {INCREMENTAL_TOLERANCE:g})"
        return CheckResult("incremental", name, PASS if ok else FAIL, detail, 0.0)

    result = _timed(check)
    result.section, result.name = "incremental", name
    return result


def training(
    site: str, spec: str, device: torch.device, updates: int, dtype: torch.dtype
) -> CheckResult:
    """A few Adam updates of a tiny model with ``spec`` at ``site`` on one synthetic batch:
    every loss finite and the last at most LOSS_FALL of the first."""
    name = f"{site}:{spec or 'plain'} {_dtype_name(dtype)} x{updates}"

    def check() -> CheckResult:
        if dtype != torch.float32 and device.type != "cuda":
            return CheckResult("training", name, SKIP, "low-precision training: CUDA only", 0.0)
        words = dictionary()
        model = build_tiny_model(site, spec, words).to(device)
        losses = train_updates(model, reversal_batch(words).to(device), updates, dtype)
        finite = all(math.isfinite(x) for x in losses)
        ok = finite and losses[-1] <= LOSS_FALL * losses[0]
        detail = f"loss {losses[0]:.3f} -> {losses[-1]:.3f}" + ("" if finite else ", NOT FINITE")
        return CheckResult("training", name, PASS if ok else FAIL, detail, 0.0)

    result = _timed(check)
    result.section, result.name = "training", name
    return result
