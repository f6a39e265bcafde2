"""Deferred tensors in the attention dataclasses: built once, on first read, never by a peek."""

from __future__ import annotations

import pytest
import torch

from localnmt.attention.context import AttentionContext, AttentionSite
from localnmt.attention.deferred import Deferred, stored, stored_shape
from localnmt.attention.problem import AttentionProblem


def make_context(k) -> AttentionContext:
    q = torch.randn(2, 4, 5, 8)
    site = AttentionSite("encoder_self", 0, 1, 32, 4)
    return AttentionContext(site, torch.randn(5, 2, 32), q, k, q, None)


def test_first_read_builds_once_and_peeks_do_not():
    calls = []
    keys = torch.randn(2, 4, 10, 8)

    def build():
        calls.append(1)
        return keys * 2

    ctx = make_context(Deferred(build, keys.shape))
    problem = AttentionProblem(site=ctx.site, q=ctx.q, k=stored(ctx, "k"), v=ctx.v)
    assert stored_shape(problem, "k") == (2, 4, 10, 8) and not stored(problem, "k").built
    assert calls == []
    first = problem.k
    assert calls == [1] and ctx.k is first and problem.k is first  # one build, shared
    torch.testing.assert_close(first, keys * 2, atol=0, rtol=0)


def test_a_plain_tensor_is_stored_as_it_is():
    keys = torch.randn(2, 4, 5, 8)
    ctx = make_context(keys)
    assert stored(ctx, "k") is keys and ctx.k is keys
    ctx.k = keys + 1
    assert stored(ctx, "k") is not keys


def test_slots_stay_required_arguments():
    with pytest.raises(TypeError, match="'v'"):
        AttentionProblem(site=None, q=torch.zeros(1), k=torch.zeros(1))


def test_a_build_of_the_wrong_shape_is_caught():
    ctx = make_context(Deferred(lambda: torch.zeros(2, 4, 9, 8), (2, 4, 10, 8)))
    with pytest.raises(AssertionError):
        _ = ctx.k
