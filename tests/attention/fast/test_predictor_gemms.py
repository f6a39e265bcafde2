"""GMM cross-attention's predictor FFNs with a hand-written backward
(fast/autograd/predictor_gemms.py) against autograd through the stacked FFNs written plainly:
one ``V_p^T tanh(W_p^T (scale·q) + b1_p) + b2_p`` per predictor (eq. 7-9, 14)."""

from __future__ import annotations

import pytest
import torch
from helpers.attention import CountCalls

from localnmt.attention.fast.autograd import predictor_gemms
from localnmt.attention.fast.autograd.predictor_gemms import BankShape, bank_outputs
from localnmt.attention.fast.native import c_bank_head

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


C_EXTENSION = c_bank_head._gmm_mixture  # for the ``build`` fixture (conftest.py)


def _bank_and_grads(q, weights, shape, scale, grad):
    """The bank's outputs and the gradients of the input and the four weights."""
    out = bank_outputs(q, weights, shape, scale)
    return (out, *torch.autograd.grad(out, (q, *weights), grad))


@pytest.mark.skipif(not c_bank_head.ENABLED, reason="localnmt._gmm_mixture was not built")
@pytest.mark.parametrize(("dim", "outs"), [(4, (4, 4, 4, 1)), (20, (1, 1, 7)), (32, (4, 4, 4, 1)),
                                          (48, (2, 2)), (16, (16, 16, 1))])  # fmt: skip
@pytest.mark.parametrize("own_pool", [False, True])
def test_output_layer_in_c_matches_torch_gemms(dim, outs, own_pool, build, monkeypatch):
    """The sigmoid and the block-diagonal output layer in C (``csrc/gmm_bank_head.h``),
    forward and backward, against the same Function with torch's GEMMs, on every build this CPU
    runs: head sizes with and without a 16-float tail, one to four predictors (a width padded
    to 16 and one that is not), rows split among torch's threads or the wrappers' pool (the
    table sums of several calls added up)."""
    torch.manual_seed(3)
    n, total = len(outs), sum(outs)
    shape = BankShape(dim, outs)
    q = torch.randn(5, 3, 7, dim, requires_grad=True)
    weights = tuple(torch.randn(s, requires_grad=True)
                    for s in ((n * dim, dim), (n * dim,), (total, dim), (total,)))  # fmt: skip
    grad = torch.randn(5, 3, 7, shape.width(q.device))
    if own_pool:
        monkeypatch.setattr(c_bank_head, "TEAM", False)
    calls = CountCalls(c_bank_head._gmm_mixture)
    monkeypatch.setattr(c_bank_head, "_gmm_mixture", calls)
    got = _bank_and_grads(q, weights, shape, 2.5, grad)
    assert calls.calls.get("head_forward", 0) >= 1 and calls.calls.get("head_backward", 0) >= 1
    monkeypatch.setattr(predictor_gemms, "HEAD_IN_C", False)
    expected = _bank_and_grads(q, weights, shape, 2.5, grad)
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-5)
    assert torch.equal(got[0][..., total:], torch.zeros_like(got[0][..., total:]))
    assert_grads_close(got[1:], expected[1:])


@pytest.mark.skipif(not c_bank_head.ENABLED, reason="localnmt._gmm_mixture was not built")
def test_output_layer_declines_to_torch_where_c_cannot_run(monkeypatch):
    """A float64 bank never reaches C; where C cannot take the gradient of a forward it ran
    (here: told so), the backward rebuilds the block-diagonal V^T and runs torch's products,
    with the gradients of the backward in C."""
    torch.manual_seed(4)
    dim, outs = 8, (4, 4, 4, 1)
    shape = BankShape(dim, outs)
    weights = tuple(torch.randn(s, requires_grad=True)
                    for s in ((4 * dim, dim), (4 * dim,), (13, dim), (13,)))  # fmt: skip
    calls = CountCalls(c_bank_head._gmm_mixture)
    monkeypatch.setattr(c_bank_head, "_gmm_mixture", calls)
    doubles = tuple(w.detach().double().requires_grad_() for w in weights)
    q64 = torch.randn(2, 3, dim, dtype=torch.float64, requires_grad=True)
    bank_outputs(q64, doubles, shape, 1.5).sum().backward()
    assert calls.calls == {}
    q = q64.detach().float().requires_grad_()
    out = bank_outputs(q, weights, shape, 1.5)
    grad = torch.randn_like(out)
    in_c = torch.autograd.grad(out, (q, *weights), grad, retain_graph=True)
    assert calls.calls == {"head_forward": 1, "head_backward": 1}
    monkeypatch.setattr(c_bank_head, "takes", lambda *tensors: False)
    via_torch = torch.autograd.grad(out, (q, *weights), grad)
    assert calls.calls == {"head_forward": 1, "head_backward": 1}
    assert_grads_close(via_torch, in_c)
