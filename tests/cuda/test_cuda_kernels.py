"""The CUDA paths, against the dense reference: FlexAttention forward and backward, the blocked
band kernel, the folded Gaussian, and fp16 / bf16 training steps of every method family.

Marked ``cuda`` and skipped without a GPU (the suite never needs one); ``scripts/gpu_check.sh``
runs them. Tolerances as ``localnmt.check.layer_runs.compare_with_float32`` measures them:
float32 kernels 1e-2 against the float32 reference (FlexAttention's and SDPA's CUDA kernels may
multiply in TF32, 10 mantissa bits like float16), low precision ``LOW_PRECISION_TOLERANCE``.
"""

from __future__ import annotations

import pytest
import torch
from helpers.attention import (
    LOW_PRECISION_TOLERANCE,
    compare_with_float32,
    make_attention,
    padded_batch,
    run_layer,
)

from localnmt.attention import dispatch
from localnmt.check.kernel_choice import FAMILIES
from localnmt.check.tiny_model import build_tiny_model, dictionary, reversal_batch, train_updates

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CUDA = torch.device("cuda")
#: float32 on the GPU: TF32 products inside the fused kernels.
FLOAT32_ON_GPU = 1e-2
LENGTH = 300  # past the kernels' length thresholds (256)


def dtypes() -> list[torch.dtype]:
    low = [torch.float16] + ([torch.bfloat16] if torch.cuda.is_bf16_supported() else [])
    return [torch.float32, *low]


#: FlexAttention differentiates a Gaussian ``score_mod``'s captured tensors (Localness's centre
#: and window) from its low-precision backward: measured on an H200 (torch 2.11) at T = 300,
#: the gradient of Localness's ``u_p`` was 1.03e-2 off in float16 (the dense path in float16:
#: 1.1e-3) and 7.5e-2 in bfloat16 (dense: 1.2e-2), the same in every run. Those cases are held
#: to these bounds instead (twice what was measured), the rest to LOW_PRECISION_TOLERANCE.
FLEX_GAUSSIAN_TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 1.5e-1}


def assert_kernel_matches_reference(
    site: str, spec: str, kernel: str | None, expected: str, low: dict | None = None
):
    """``spec``'s layer on the GPU through ``kernel`` (None: the automatic choice, which must
    be ``expected``) in each dtype, against the float32 reference path: outputs at real
    queries and every gradient."""
    att = make_attention(site, spec, embed_dim=64, heads=4, train=True)
    batch = padded_batch(site, LENGTH, 64, device=CUDA)
    reference = run_layer(att, batch, torch.float32, need_weights=True, reference=True)
    for dtype in dtypes():
        with dispatch.forced_kernel(kernel), dispatch.trace() as seen:
            run = run_layer(att, batch, dtype, need_weights=False)
        assert expected in seen.kernels("attention"), (dtype, seen.table())
        got = compare_with_float32(reference, run, batch.real_queries)
        tolerance = (
            FLOAT32_ON_GPU if dtype == torch.float32 else (low or LOW_PRECISION_TOLERANCE)[dtype]
        )
        assert got.finite and got.error <= tolerance, (spec, dtype, got)


FLEX_CASES = [
    ("encoder_self", "csan_1d"),
    ("encoder_self", "csan_2d"),
    ("encoder_self", "localness + csan_1d[window=7]"),  # score_mod and block mask
    ("encoder_self", "local_heads_renorm[masks=prev1;next1;band2;global]"),
    ("decoder_self", "csan_1d"),  # causal
]


@pytest.mark.parametrize("site,spec", FLEX_CASES)
def test_flex_attention_forward_and_backward(site, spec):
    from localnmt.attention.fast import flex

    if not flex.available():
        pytest.skip(f"torch {torch.__version__} has no FlexAttention")
    gaussian = "localness" in spec  # a score_mod with captured tensors to differentiate
    low = FLEX_GAUSSIAN_TOLERANCE if gaussian else None
    assert_kernel_matches_reference(site, spec, None, "flex", low)


@pytest.mark.parametrize("site,spec", [("encoder_self", "csan_1d"), ("encoder_self", "csan_2d"),
                                       ("decoder_self", "csan_1d")])  # fmt: skip
def test_band_kernel_on_the_gpu(site, spec):
    assert_kernel_matches_reference(site, spec, "band", "band")


@pytest.mark.parametrize("spec", ["localness", "neighbor"])
def test_folded_gaussian_on_the_gpu(spec):
    att = make_attention("encoder_self", spec, embed_dim=64, heads=4, train=True)
    batch = padded_batch("encoder_self", LENGTH, 64, device=CUDA)
    reference = run_layer(att, batch, torch.float32, need_weights=True, reference=True)
    with dispatch.forced_kernel("gaussian_fold"), dispatch.trace() as seen:
        run = run_layer(att, batch, torch.float32, need_weights=False)
    assert seen.kernels("attention") == ["gaussian_fold"]
    got = compare_with_float32(reference, run, batch.real_queries)
    assert got.finite and got.error <= FLOAT32_ON_GPU, got


@pytest.mark.parametrize("site,spec", FAMILIES, ids=lambda v: v or "plain")
def test_low_precision_training_steps(site, spec):
    """fp16 (autocast and a gradient scaler, as fairseq's --amp) and bf16: a tiny model's loss
    stays finite and falls over 20 updates."""
    words = dictionary()
    batch = reversal_batch(words).to(CUDA)
    for dtype in dtypes()[1:]:
        model = build_tiny_model(site, spec, words).to(CUDA)
        losses = train_updates(model, batch, 20, dtype)
        assert all(torch.isfinite(torch.tensor(losses))), (dtype, losses)
        assert losses[-1] <= 0.9 * losses[0], (dtype, losses)
