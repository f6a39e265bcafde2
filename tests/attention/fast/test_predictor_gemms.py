"""GMM cross-attention's predictor FFNs with a hand-written backward
(fast/autograd/predictor_gemms.py) against autograd through the stacked FFNs written plainly:
one ``V_p^T tanh(W_p^T (scale·q) + b1_p) + b2_p`` per predictor (eq. 7-9, 14)."""

from __future__ import annotations

import pytest
import torch

from localnmt.attention.fast.autograd.predictor_gemms import BankShape, bank_outputs

TQ, B = 5, 3


def assert_grads_close(got, expected) -> None:
    for a, b in zip(got, expected, strict=True):
        scale = max(float(b.abs().max()), 1.0)
        torch.testing.assert_close(a, b, atol=1e-5 * scale, rtol=1e-4)


def plain_bank(q, weights, outs, scale):
    """Each predictor on its own, tanh as written in the paper."""
    w, b1, v, b2 = weights
    dim, found, first = q.size(-1), [], 0
    for i, out in enumerate(outs):
        hidden = torch.tanh(
            q * scale @ w[i * dim : (i + 1) * dim].t() + b1[i * dim : (i + 1) * dim]
        )
        found.append(hidden @ v[first : first + out].t() + b2[first : first + out])
        first += out
    return torch.cat(found, dim=-1)


@pytest.mark.parametrize("outs", [(4, 4, 4, 1), (1, 2)])
@pytest.mark.parametrize("layout", ["heads split from (T, B, E)", "contiguous"])
def test_bank_gemms_match_autograd_of_the_plain_predictors(layout, outs):
    """The hand-written backward of eq. 7-9 and 14's stacked FFNs against autograd through
    each FFN written plainly: outputs (the padding columns exactly 0) and the gradients of
    the input and the four stacked weights, and with create_graph a differentiable
    gradient."""
    torch.manual_seed(0)
    dim, scale, total = 8, 8**0.5, sum(outs)
    x = torch.randn(TQ, B, 2 * dim, requires_grad=True)
    q = (
        x.view(TQ, B, 2, dim).permute(1, 2, 0, 3)
        if layout != "contiguous"
        else x.view(B, 2, TQ, dim)
    )
    n = len(outs)
    weights = [
        torch.randn(s, requires_grad=True)
        for s in ((n * dim, dim), (n * dim,), (total, dim), (total,))
    ]
    inputs = [x, *weights]
    shape = BankShape(dim, outs)
    got = bank_outputs(q, tuple(weights), shape, scale)
    assert got.grad_fn is not None and "BankGemms" in type(got.grad_fn).__name__
    width = shape.width(q.device)
    assert got.size(-1) == width and (width > total) == (outs == (4, 4, 4, 1))
    assert torch.equal(got[..., total:], torch.zeros_like(got[..., total:]))
    got = got[..., :total]
    expected = plain_bank(q, weights, outs, scale)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    grad = torch.randn_like(expected)
    assert_grads_close(torch.autograd.grad(got, inputs, grad, retain_graph=True),
                       torch.autograd.grad(expected, inputs, grad, retain_graph=True))  # fmt: skip
    again = torch.autograd.grad(got, inputs, grad, create_graph=True)
    first = torch.autograd.grad(expected, inputs, grad, create_graph=True)
    assert [g.requires_grad for g in again] == [g.requires_grad for g in first]
    second = torch.autograd.grad(again[0].square().sum(), weights[0])
    assert_grads_close(second, torch.autograd.grad(first[0].square().sum(), weights[0]))
    with torch.no_grad():  # the folded weights of inference: the same outputs
        folded = shape.folded(tuple(weights), scale)
        plain = torch.nn.functional.linear(torch.sigmoid(torch.nn.functional.linear(
            q, folded[0], folded[1])), folded[2], folded[3])  # fmt: skip
    torch.testing.assert_close(plain[..., :total], expected, atol=1e-5, rtol=1e-5)


def test_frozen_weights_take_only_the_input_gradient():
    """Weights without requires_grad (a frozen bank) get no gradient; the input's is
    autograd's."""
    torch.manual_seed(1)
    dim, outs = 4, (2, 1)
    q = torch.randn(2, 3, dim, requires_grad=True)
    weights = tuple(torch.randn(s) for s in ((2 * dim, dim), (2 * dim,), (3, dim), (3,)))
    got = bank_outputs(q, weights, BankShape(dim, outs), 2.0)[..., :3]
    expected = plain_bank(q, weights, outs, 2.0)
    grad = torch.randn_like(expected)
    assert_grads_close(torch.autograd.grad(got, q, grad), torch.autograd.grad(expected, q, grad))


def test_torch_func_takes_the_differentiable_ops():
    """Under ``torch.func`` (wrapped tensors, no storage) the bank runs as torch ops: the
    gradient of the input equals autograd's through the hand-written backward."""
    torch.manual_seed(2)
    dim, outs = 4, (2, 1)
    weights = tuple(torch.randn(s) for s in ((2 * dim, dim), (2 * dim,), (3, dim), (3,)))
    shape = BankShape(dim, outs)

    def total(q):
        return bank_outputs(q, weights, shape, 2.0)[..., :3].square().sum()

    q = torch.randn(2, 3, dim)
    leaf = q.clone().requires_grad_()
    assert "BankGemms" in type(bank_outputs(leaf, weights, shape, 2.0).grad_fn).__name__
    (expected,) = torch.autograd.grad(total(leaf), leaf)
    torch.testing.assert_close(torch.func.grad(total)(q), expected, atol=1e-5, rtol=1e-5)
