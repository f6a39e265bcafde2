"""GMM cross-attention's predictor FFNs with a hand-written backward
(fast/autograd/predictor_gemms.py) against autograd through ``F.linear``."""

from __future__ import annotations

import pytest
import torch

from localnmt.attention.fast.autograd.predictor_gemms import predictor_outputs

TQ, B = 5, 3


def assert_grads_close(got, expected) -> None:
    for a, b in zip(got, expected, strict=True):
        scale = max(float(b.abs().max()), 1.0)
        torch.testing.assert_close(a, b, atol=1e-5 * scale, rtol=1e-4)


@pytest.mark.parametrize("layout", ["heads split from (T, B, E)", "contiguous"])
def test_predictor_gemms_match_autograd_of_the_linear_layers(layout):
    """The hand-written backward of eq. 7-9 and 14's two layers against autograd through
    ``F.linear``: outputs and the gradients of the input and the four weights, and with
    create_graph a differentiable gradient."""
    torch.manual_seed(0)
    x = torch.randn(TQ, B, 2 * 8, requires_grad=True)
    q = x.view(TQ, B, 2, 8).permute(1, 2, 0, 3) if layout != "contiguous" else x.view(B, 2, TQ, 8)
    weights = [torch.randn(s, requires_grad=True) for s in ((24, 8), (24,), (16, 24), (16,))]
    inputs = [x, *weights]
    got = predictor_outputs(q, *weights)
    expected = torch.nn.functional.linear(torch.sigmoid(torch.nn.functional.linear(
        q, weights[0], weights[1])), weights[2], weights[3])  # fmt: skip
    assert got.grad_fn is not None and "PredictorGemms" in type(got.grad_fn).__name__
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    grad = torch.randn_like(expected)
    assert_grads_close(torch.autograd.grad(got, inputs, grad, retain_graph=True),
                       torch.autograd.grad(expected, inputs, grad, retain_graph=True))  # fmt: skip
    again = torch.autograd.grad(got, inputs, grad, create_graph=True)
    first = torch.autograd.grad(expected, inputs, grad, create_graph=True)
    assert [g.requires_grad for g in again] == [g.requires_grad for g in first]
    second = torch.autograd.grad(again[0].square().sum(), weights[0])
    assert_grads_close(second, torch.autograd.grad(first[0].square().sum(), weights[0]))
