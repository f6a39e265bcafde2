"""float16 and bfloat16 through every method's forward and backward on the CPU.

Each case runs one layer (16 dims, 4 heads, 10 tokens; mixed left and right padding, a
sentence of one token and one of padding only, so some queries have no allowed key) in float32
and in the low-precision dtype, through the fused kernels (no weights) and through the dense
reference (weights). Everything must be finite, and every output at a real query and every
gradient within ``LOW_PRECISION_TOLERANCE`` of float32: 1e-2 for float16, 1e-1 for bfloat16,
relative to the larger of the tensor's largest float32 value and 5 % of the layer's largest
gradient (``localnmt.check.layer_runs.compare_with_float32``; docs/design.md, "Numerics").
"""

from __future__ import annotations

import pytest
import torch
from helpers.attention import (
    LOW_PRECISION_TOLERANCE,
    METHOD_CASES,
    compare_with_float32,
    make_attention,
    padded_batch,
    run_layer,
)

from localnmt import torch_compat
from localnmt.attention.modifier import modifier_names
from localnmt.attention.problem import zero_empty_rows
from localnmt.attention.spec import parse_spec

DTYPES = [torch.float16, torch.bfloat16]


def check_low_precision(
    site: str, spec: str, dtype: torch.dtype, setup=None, close: bool = True
) -> None:
    """The layer of ``spec`` at ``site`` in ``dtype`` against float32, both paths: finite,
    and (``close``) within the tolerance."""
    att = make_attention(site, spec, embed_dim=16, heads=4, train=True)
    if setup is not None:
        with torch.no_grad():
            setup(att)
    batch = padded_batch(site, 10, 16)
    for need_weights in (False, True):
        reference = run_layer(att, batch, torch.float32, need_weights)
        assert torch.isfinite(reference.output).all()
        got = compare_with_float32(
            reference, run_layer(att, batch, dtype, need_weights), batch.real_queries
        )
        where = f"{site}:{spec or 'plain'} {dtype} weights={need_weights}"
        assert got.finite, f"{where}: not finite"
        assert not close or got.error <= LOW_PRECISION_TOLERANCE[dtype], (where, got)


def test_the_cases_cover_every_method():
    used = {item.method for _, spec in METHOD_CASES for item in parse_spec(spec)}
    # (names from "_" are test probes that other test files register)
    assert used == {name for name in modifier_names() if not name.startswith("_")}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("site,spec", METHOD_CASES, ids=lambda v: v or "plain")
def test_every_method_forward_and_backward(site, spec, dtype):
    check_low_precision(site, spec, dtype)


def _fill(name: str, value: float):
    def setup(att):
        for p_name, p in att.named_parameters():
            if p_name.endswith(name):
                p.fill_(value)

    return setup


EXTREMES = [  # σ at its floor and at its widest, through saturated predictors
    pytest.param("encoder_self", "localness", _fill("u_d.bias", -30.0), id="localness-floor"),
    pytest.param("encoder_self", "localness", _fill("u_d.bias", 30.0), id="localness-widest"),
    pytest.param("encoder_self", "localness[window=head,d_floor=0.001]",
                 _fill("modifiers.0.z", -30.0), id="localness-head-0.001"),
    pytest.param("encoder_self", "neighbor", _fill("window.out.bias", -30.0), id="neighbor-floor"),
    pytest.param("encoder_self", "local_hard[half_window=0.5]", None, id="local_hard-0.25"),
    pytest.param("encoder_self", "local_hard[half_window=1000]", None, id="local_hard-500"),
    pytest.param("cross", "gmm", _fill("predictors.out_bias", -30.0), id="gmm-mu-0"),
    pytest.param("cross", "gmm", _fill("predictors.out_bias", 30.0), id="gmm-mu-J"),
    pytest.param("cross", "gmm[sigma_min=0.01]", _fill("predictors.out_bias", -30.0),
                 id="gmm-sigma-0.01"),
    pytest.param("cross", "gmm[variant=norm,sigma_min=0.01]", _fill("predictors.out_bias", -30.0),
                 id="gmm-norm-sigma-0.01"),
    pytest.param("cross", "gmm[variant=synthesis]", _fill("predictors.out_bias", 30.0),
                 id="synthesis-sigma-e^-4"),
    pytest.param("cross", "gmm[variant=synthesis]", _fill("predictors.out_bias", -30.0),
                 id="synthesis-sigma-e^15"),
    pytest.param("cross", "hardcoded_gaussian[std=0.01]", None, id="hardcoded-0.01"),
    pytest.param("cross", "hardcoded_gaussian[std=10000]", None, id="hardcoded-10000"),
]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("site,spec,setup", EXTREMES)
def test_gaussian_and_mixture_terms_at_the_extremes_of_sigma(site, spec, setup, dtype):
    """Finite forward and backward; not held to the tolerance: at σ = 0.05 a Gaussian over
    integer positions is nearly one-hot and its gradient in the centre P swings with P's own
    rounding (P = (I − 1)·sigmoid(·) from low-precision activations), an ill-conditioning of
    the function itself, not of its computation."""
    check_low_precision(site, spec, dtype, setup, close=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_before_softmax_logits_stay_finite(dtype):
    """fairseq's ``before_softmax`` hands back the logits in the input's dtype: blocked keys
    get that dtype's most negative finite value, not −inf (a row without any allowed key would
    give NaN in a later softmax)."""
    att = make_attention("encoder_self", "csan_1d[window=3]", embed_dim=16, heads=4).to(dtype)
    batch = padded_batch("encoder_self", 10, 16)
    x = batch.query.to(dtype)
    logits, _ = att(x, x, x, key_padding_mask=batch.key_padding_mask, before_softmax=True)
    assert logits.dtype == dtype and torch.isfinite(logits).all()
    assert (logits < -1e4).any()  # the blocked keys are there
    assert torch.isfinite(torch.softmax(logits.float(), -1)).all()


@pytest.mark.skipif(
    not torch_compat.cpu_supports(torch.float16), reason="this torch has no CPU float16 matmul"
)
def test_a_fill_that_overflows_in_float16_fails_these_checks(monkeypatch):
    """The checks above can fail: an SDPA kernel that adds the blocked keys as −1e9 in the
    input's dtype (−inf once cast to float16) and takes the softmax there gives NaN in float16
    at the sentence of padding only (NaN · 0 is NaN), and the float16 check catches it;
    float32 and bfloat16 hold −1e9 and pass."""
    from localnmt.attention.fast import sdpa

    def broken_masked_sdpa(q, k, v, allowed, bias, dropout_p):
        logits = q @ k.transpose(-1, -2)
        if allowed is not None:
            fill = torch.tensor(-1e9).to(q.dtype)  # float16: −inf
            logits = logits + torch.zeros_like(logits).masked_fill(~allowed, fill)
        out = torch.softmax(logits, dim=-1) @ v
        return zero_empty_rows(out, allowed)

    monkeypatch.setattr(sdpa, "masked_sdpa", broken_masked_sdpa)
    with pytest.raises(AssertionError, match="not finite"):
        check_low_precision("encoder_self", "", torch.float16)
    check_low_precision("encoder_self", "", torch.bfloat16)


@pytest.mark.parametrize("site,spec", [("cross", "gmm"), ("cross", "gmm[variant=norm]"),
                                       ("encoder_self", "localness[window=query]")])  # fmt: skip
def test_training_steps_under_cpu_autocast(site, spec):
    """bfloat16 autocast with float32 parameters (mixed precision, as --amp): the hand-written
    backward of GMM's predictors once multiplied the autocast gradient by the float32 weights
    and stopped; the loss must stay finite and fall."""
    from localnmt.check.tiny_model import (
        build_tiny_model,
        dictionary,
        reversal_batch,
        train_updates,
    )

    words = dictionary()
    losses = train_updates(build_tiny_model(site, spec, words), reversal_batch(words), 6,
                           torch.bfloat16)  # fmt: skip
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < losses[0], losses
