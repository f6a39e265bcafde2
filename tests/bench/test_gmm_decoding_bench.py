"""bench.gmm_decoding: each form runs the path it names (one tiny beam search per form)."""

from __future__ import annotations

import pytest

from bench import gmm_decoding
from localnmt.attention import dispatch
from localnmt.attention.fast.native import gmm_step
from localnmt.attention.pipeline import LocalAttention


@pytest.mark.skipif(not gmm_step.ENABLED, reason="localnmt._gmm_step was not built")
def test_each_form_takes_the_path_it_names(monkeypatch):
    """Traced per form: the full model's steps compute the predictors in C; with the
    predictors by torch they do not; with torch ops no C step runs; the forms with a post of
    their own run it at every layer (the dense path), not only at the alignment layer, the
    one layer that computes weights in beam search as fairseq-generate sets it up."""
    seen: dict[str, tuple[set, int]] = {}
    posts = {"n": 0}
    built: dict[str, int] = {}
    original = gmm_decoding.interleaved
    problem = LocalAttention._problem

    def counted(attention, *args, **kwargs):
        posts["built"] += attention.encoder_decoder_attention
        return problem(attention, *args, **kwargs)

    monkeypatch.setattr(LocalAttention, "_problem", counted)

    def traced(fns, device, *, warmup, repeats):
        for name, fn in fns.items():
            if name == "baseline":
                continue
            posts["n"] = posts["built"] = 0
            with dispatch.trace() as calls:
                fn()
            steps = {(c.kernel, tuple(c.detail)) for c in calls.calls if c.op == "gmm step"}
            seen[name], built[name] = (steps, posts["n"]), posts["built"]
        return original(fns, device, warmup=0, repeats=1)

    for name in ("_softmax_unchanged", "_predictors_only"):
        inner = getattr(gmm_decoding, name)

        def counting(self, ctx, probs, inner=inner):
            posts["n"] += 1
            return inner(self, ctx, probs)

        monkeypatch.setitem(gmm_decoding.FORMS, {"_softmax_unchanged": "reference path only",
                                                 "_predictors_only": "+ predictors"}[name],
                            (counting, False, True, True, True))  # fmt: skip
    monkeypatch.setattr(gmm_decoding, "interleaved", traced)
    gmm_decoding.take_apart("zhang2021/table-2/our-method/base", 3, 1, 1, 50, dims=(32, 64))
    assert seen["full"][0] == {("gmm_c_attention", ("predictors in C",))}
    assert seen["full, no step plans"][0] == seen["full"][0]
    assert built["full, no step plans"] > built["full"]  # the plans spared those problems
    assert seen["full, predictors by torch"][0] == {("gmm_c_attention", ())}
    assert seen["full, torch ops"][0] == {("gmm_dense_step", ())}
    for form in ("reference path only", "+ predictors"):
        steps, posts_run = seen[form]
        assert steps == set()  # no fused step: every layer's post ran instead
        # beyond the alignment layer's (one per decoding step: 3 steps and EOS)
        assert posts_run > 4, (form, posts_run)
