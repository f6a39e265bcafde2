"""The decoding-step shortcuts of ``LocalAttention._step_shortcut``: a cross-attention layer's
step kept as a plan (localnmt/attention/step_plan.py) and run again on the next steps' queries,
and relative positions' self-attention step folded without a context, give step by step, bit
for bit, what the whole pipeline gives; they run only where they fit, and what they leave out
sends the call back to the pipeline."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

import pytest
import torch
from helpers.attention import GMM_APPROX_SPECS, PlanRuns, make_attention, padding_mask

from localnmt.attention import dispatch, shared_source, step_plan
from localnmt.attention.fast.native import gmm_step
from localnmt.attention.incremental import reorder_buffer
from localnmt.attention.pipeline import LocalAttention

E, H, B, TQ, TK = 16, 4, 3, 6, 9
#: Every method that plans its steps, and GMM variants whose steps are not planned.
PLANNED = ["hardcoded_gaussian", "hardcoded_gaussian[ratio=1.5,std=0.7]", *GMM_APPROX_SPECS]
NOT_PLANNED = ["gmm[variant=norm]", "gmm[variant=synthesis]", "gmm[heads=1-2]"]


def decode(attn: LocalAttention, x, src, pad, plans: bool, monkeypatch, reorder=None,
           traced: bool = True, **call) -> tuple[torch.Tensor, list[str]]:  # fmt: skip
    """Step-by-step outputs ``(TQ, B, E)`` through fairseq's incremental interface, with
    plans on or off, and the kernel of every traced call (``traced`` False: none traced, so
    that prepared kernels run); ``reorder(step)`` gives beam search's new order before that
    step (or None)."""
    monkeypatch.setattr(step_plan, "ENABLED", plans)
    state: dict = {}
    outs = []
    with torch.no_grad(), dispatch.trace() if traced else nullcontext() as seen:
        for t in range(x.size(0)):
            order = None if reorder is None else reorder(t)
            if order is not None:
                attn.reorder_incremental_state(state, order)
            out, _ = attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                          static_kv=True, need_weights=False, **call)  # fmt: skip
            outs.append(out[0])
    return torch.stack(outs), [] if seen is None else [c.kernel for c in seen.calls]


def inputs(side: str | None, batch: int = B, seed: int = 1):
    torch.manual_seed(seed)
    x, src = torch.randn(TQ, batch, E), torch.randn(TK, batch, E) * 2
    lengths = [TK, TK - 4, 2, TK - 1, 5, 1][:batch]
    return x, src, None if side is None else padding_mask(lengths, TK, side)


def beam_inputs(side: str, beam: int):
    """Three sentences, each repeated for ``beam`` hypotheses: queries ``(TQ, 3·beam, E)``,
    the source ``(TK, 3·beam, E)`` and its padding."""
    _, src, pad = inputs(side, batch=3)
    src, pad = src.repeat_interleave(beam, dim=1), pad.repeat_interleave(beam, dim=0)
    return torch.randn(TQ, 3 * beam, E), src, pad


@pytest.mark.parametrize("side", ["left", "right", None])
@pytest.mark.parametrize("spec", PLANNED)
def test_planned_steps_are_the_pipelines_bit_for_bit(spec, side, monkeypatch):
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    x, src, pad = inputs(side)
    runs = PlanRuns(monkeypatch)
    planned, kernels = decode(attn, x, src, pad, True, monkeypatch)
    assert runs.count == TQ - 1  # every step after the first
    whole, whole_kernels = decode(attn, x, src, pad, False, monkeypatch)
    assert runs.count == TQ - 1
    torch.testing.assert_close(planned, whole, atol=0, rtol=0)
    assert kernels == whole_kernels  # the trace sees the same registry calls


class PreparedRuns:
    """Counts the steps a prepared kernel computed (``dispatch.PreparedKernel``)."""

    def __init__(self, monkeypatch):
        self.count = 0
        real = dispatch.PreparedKernel.__call__

        def counted(prepared, q, k, v):
            out = real(prepared, q, k, v)
            self.count += out is not None
            return out

        monkeypatch.setattr(dispatch.PreparedKernel, "__call__", counted)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("spec", GMM_APPROX_SPECS)
def test_untraced_gmm_plans_run_the_prepared_step_bit_for_bit(spec, shared, monkeypatch):
    """Not traced, a GMM plan runs its step kernel prepared (the source's and the predictors'
    checks done once): through beam search's reorders within sentences, with keys shared by
    the hypotheses or moved to new tensors, every step is the pipeline's, bit for bit."""
    beam = 2
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    x, src, pad = beam_inputs("left", beam)
    monkeypatch.setattr(shared_source, "ENABLED", shared)
    swap = torch.tensor([1, 0, 2, 3, 5, 4])
    prepared = PreparedRuns(monkeypatch)
    planned, _ = decode(attn, x, src, pad, True, monkeypatch,
                        lambda t: swap if t in (2, 3) else None, traced=False)  # fmt: skip
    assert prepared.count == (TQ - 1 if gmm_step.ENABLED else 0)
    whole, _ = decode(attn, x, src, pad, False, monkeypatch,
                      lambda t: swap if t in (2, 3) else None, traced=False)  # fmt: skip
    torch.testing.assert_close(planned, whole, atol=0, rtol=0)


@pytest.mark.parametrize("spec", NOT_PLANNED)
def test_other_variants_and_head_selections_keep_the_pipeline(spec, monkeypatch):
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    x, src, pad = inputs("right")
    runs = PlanRuns(monkeypatch)
    decode(attn, x, src, pad, True, monkeypatch)
    assert runs.count == 0


@pytest.mark.parametrize("spec", ["hardcoded_gaussian", "gmm"])
def test_beam_search_reorders_and_shrinks_around_the_plan(spec, monkeypatch):
    """Beam search with a shared source (one key row per sentence): reordering hypotheses
    within their sentences keeps the source, and the plan runs on; a finished sentence
    leaving the batch changes it, and the pipeline runs (and plans again)."""
    beam = 2
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    x, src, pad = beam_inputs("left", beam)
    swap = torch.tensor([1, 0, 2, 3, 5, 4])

    def reorder(step: int):
        return swap if step in (2, 3) else None

    runs = PlanRuns(monkeypatch)
    planned, _ = decode(attn, x, src, pad, True, monkeypatch, reorder)
    assert runs.count == TQ - 1
    whole, _ = decode(attn, x, src, pad, False, monkeypatch, reorder)
    monkeypatch.setattr(shared_source, "ENABLED", False)  # one key row per hypothesis
    apart, _ = decode(attn, x, src, pad, False, monkeypatch, reorder)
    torch.testing.assert_close(planned, whole, atol=0, rtol=0)
    torch.testing.assert_close(planned, apart, atol=1e-6, rtol=1e-5)


def test_a_batch_that_changes_runs_the_pipeline(monkeypatch):
    """Hypotheses leave the batch (fairseq drops finished sentences): new rows, new keys."""
    attn = make_attention("cross", "hardcoded_gaussian", embed_dim=E, heads=H)
    x, src, pad = inputs("right", batch=3)
    monkeypatch.setattr(shared_source, "ENABLED", False)
    state: dict = {}
    runs = PlanRuns(monkeypatch)
    outs = []
    with torch.no_grad():
        for t in range(TQ):
            if t == 3:  # sentence 1 finished: rows 0 and 2 go on
                attn.reorder_incremental_state(state, torch.tensor([0, 2]))
                x, pad = x[:, [0, 2]], pad[[0, 2]]
            out, _ = attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                          static_kv=True, need_weights=False)  # fmt: skip
            outs.append(out[0])
    assert runs.count == TQ - 2  # steps 1, 2, 4, 5: step 3 had other keys
    monkeypatch.setattr(step_plan, "ENABLED", False)
    state = {}
    with torch.no_grad():
        attn(x[:1], src[:, [0, 2]], src[:, [0, 2]], key_padding_mask=pad, incremental_state=state,
             static_kv=True, need_weights=False)  # fmt: skip
        for t in range(1, TQ):
            out, _ = attn(x[t : t + 1], None, None, key_padding_mask=pad, incremental_state=state,
                          static_kv=True, need_weights=False)  # fmt: skip
            if t >= 3:
                torch.testing.assert_close(outs[t], out[0], atol=0, rtol=0)


def step_problem_inputs(spec: str = "hardcoded_gaussian"):
    """A layer after one step (a plan kept), and the tensors of its next step."""
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    x, src, pad = inputs("right")
    k = attn._split_heads(attn.k_proj(src), B).contiguous()
    v = attn._split_heads(attn.v_proj(src), B).contiguous()
    q = attn._split_heads(attn.q_proj(x[:1]) * attn.scaling, B)
    state: dict = {}
    with torch.no_grad():
        attn.attend_heads(x[:1], q, k, v, key_padding_mask=pad, state=state)
    assert step_plan.PLAN_KEY in state
    return attn, x, q, k, v, pad, state


@pytest.mark.parametrize(
    "change",
    ["other keys", "values written to", "other padding", "no padding", "key group", "float64",
     "weights", "recording", "dropout", "attention mask", "forced kernel", "switched off"],
)  # fmt: skip
def test_what_a_plan_leaves_out_runs_the_pipeline(change, monkeypatch):
    attn, x, q, k, v, pad, state = step_problem_inputs()
    runs = PlanRuns(monkeypatch)
    call: dict = dict(key_padding_mask=pad, state=state, query_offset=torch.ones(B))
    with torch.no_grad():
        attn.attend_heads(x[:1], q, k, v, **call)
        assert runs.count == 1  # the unchanged step runs the plan
        if change == "other keys":
            k = k.clone()
        elif change == "values written to":
            v.mul_(1.0)
        elif change == "other padding":
            call["key_padding_mask"] = pad.roll(1, dims=1)
        elif change == "no padding":
            call["key_padding_mask"] = None
        elif change == "key group":
            call["key_group"] = 3
            k, v = k[:1], v[:1]
        elif change == "float64":
            attn.double()
            q, k, v = q.double(), k.double(), v.double()
        elif change == "weights":
            call["need_weights"] = True
        elif change == "recording":
            attn.recording = True
        elif change == "dropout":
            attn.train()
            attn.dropout_module.p = 0.1
        elif change == "attention mask":
            call["attn_mask"] = torch.zeros(1, TK)
        elif change == "switched off":
            monkeypatch.setattr(step_plan, "ENABLED", False)
        with dispatch.forced_kernel("fixed_gaussian_torch" if change == "forced kernel" else None):
            attn.attend_heads(x[:1], q, k, v, **call)
    assert runs.count == 1


def test_equal_padding_in_another_tensor_fits(monkeypatch):
    """transformers hands each step a new mask: equal padding lets the plan run."""
    attn, x, q, k, v, pad, state = step_problem_inputs()
    runs = PlanRuns(monkeypatch)
    with torch.no_grad():
        attn.attend_heads(x[:1], q, k, v, key_padding_mask=pad.clone(), state=state,
                          query_offset=torch.ones(B))  # fmt: skip
    assert runs.count == 1


def test_inference_tensors_keep_no_plan():
    """Inference tensors have no version counter: a write to them could not be seen."""
    attn = make_attention("cross", "hardcoded_gaussian", embed_dim=E, heads=H)
    x, src, pad = inputs("right")
    state: dict = {}
    with torch.inference_mode():
        for t in range(2):
            attn(x[t : t + 1], src, src, key_padding_mask=pad, incremental_state=state,
                 static_kv=True, need_weights=False)  # fmt: skip
    buffers = [entries for entries in state.values() if isinstance(entries, dict)]
    assert buffers and all(step_plan.PLAN_KEY not in entries for entries in buffers)


def test_reordering_moves_the_plan_with_the_rows_or_drops_it():
    """Beam search's reorder passes over the plan (not a tensor); it keeps holding where each
    row is taken from its own group of equal source rows, not where rows cross groups or the
    batch changes size."""
    attn, x, q, k, v, pad, state = step_problem_inputs()
    plan = state[step_plan.PLAN_KEY]
    reorder_buffer(state, torch.tensor([0, 1, 2]), cross_attention=True, shares_source=False)
    assert state[step_plan.PLAN_KEY] is plan and plan.moved
    reorder_buffer(state, torch.tensor([2, 1, 0]), cross_attention=True, shares_source=False)
    assert step_plan.PLAN_KEY not in state  # three sentences: rows 0 and 2 crossed
    attn, x, q, k, v, pad, state = step_problem_inputs()
    reorder_buffer(state, torch.tensor([0, 1]), cross_attention=True, shares_source=False)
    assert step_plan.PLAN_KEY not in state


@pytest.mark.parametrize("spec", ["hardcoded_gaussian", "gmm"])
@pytest.mark.parametrize("across", [False, True])
def test_a_plan_follows_keys_beam_search_moves_within_sentences(spec, across, monkeypatch):
    """One key row per hypothesis (no shared source): beam search's reorder makes new key
    and value tensors. Moved within each sentence's hypotheses (equal rows) the plan runs on
    them; moved across sentences, the pipeline runs that step (and plans again). Either way
    every step is the pipeline's, bit for bit."""
    beam = 2
    attn = make_attention("cross", spec, embed_dim=E, heads=H)
    x, src, pad = beam_inputs("right", beam)
    monkeypatch.setattr(shared_source, "ENABLED", False)
    order = torch.tensor([2, 3, 0, 1, 4, 5] if across else [1, 0, 2, 3, 5, 4])

    def reorder(step: int):
        return order if step in (2, 4) else None

    runs = PlanRuns(monkeypatch)
    planned, _ = decode(attn, x, src, pad, True, monkeypatch, reorder)
    assert runs.count == (TQ - 3 if across else TQ - 1)
    whole, _ = decode(attn, x, src, pad, False, monkeypatch, reorder)
    torch.testing.assert_close(planned, whole, atol=0, rtol=0)


def test_a_moved_plan_takes_only_tensors_like_its_own(monkeypatch):
    """After a reorder within groups the next step's new keys are taken as the moved ones
    only if shape, dtype and device match; the step after takes only those very tensors."""
    attn, x, q, k, v, pad, state = step_problem_inputs()
    plan = state[step_plan.PLAN_KEY]
    reorder_buffer(state, torch.tensor([0, 1, 2]), cross_attention=True, shares_source=False)
    assert not plan.fits(q, k[:, :, :-1], v[:, :, :-1], pad, 1)
    moved_k, moved_v = k.clone(), v.clone()
    assert plan.fits(q, moved_k, moved_v, pad, 1) and plan.k is moved_k and not plan.moved
    assert not plan.fits(q, k, v, pad, 1)  # the old tensors are not the plan's any more


class PipelineCalls:
    """Counts the calls that built a context and problem (``LocalAttention._problem``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.count = 0
        real = LocalAttention._problem

        def counted(attention, *args, **kwargs):
            self.count += 1
            return real(attention, *args, **kwargs)

        monkeypatch.setattr(LocalAttention, "_problem", counted)


def decode_self(attn: LocalAttention, x, shortcut: bool, monkeypatch, pad=None) -> torch.Tensor:
    """Decoder self-attention step by step through fairseq's incremental interface."""
    monkeypatch.setattr(step_plan, "ENABLED", shortcut)
    state: dict = {}
    with torch.no_grad():
        outs = [attn(x[t : t + 1], x[t : t + 1], x[t : t + 1], key_padding_mask=pad,
                     incremental_state=state, need_weights=False)[0][0]
                for t in range(x.size(0))]  # fmt: skip
    return torch.stack(outs)


@pytest.mark.parametrize("spec", ["rel_pos[clip=2]", "rel_pos[clip=16]", "rel_pos[clip=0]"])
def test_relative_self_attention_steps_are_the_pipelines_bit_for_bit(spec, monkeypatch):
    """A decoding step of relative positions without padding: the keys and values plus the
    gathered table rows, without the context, as the pipeline's fold."""
    attn = make_attention("decoder_self", spec, embed_dim=E, heads=H, max_positions=64)
    torch.manual_seed(4)
    x = torch.randn(TQ, B, E)
    calls = PipelineCalls(monkeypatch)
    with dispatch.trace() as short_trace:
        short = decode_self(attn, x, True, monkeypatch)
    assert calls.count == 0
    with dispatch.trace() as whole_trace:
        whole = decode_self(attn, x, False, monkeypatch)
    assert calls.count == TQ
    torch.testing.assert_close(short, whole, atol=0, rtol=0)
    assert [c.kernel for c in short_trace.calls] == [c.kernel for c in whole_trace.calls]


@pytest.mark.parametrize("spec", ["rel_pos[clip=2]", "rel_pos[clip=16]"])
def test_untraced_relative_steps_run_the_prepared_sdpa_bit_for_bit(spec, monkeypatch):
    """Not traced, a relative step after the first runs the SDPA call prepared at the first
    (no dispatch over the registry): every step is the pipeline's, bit for bit; after the
    registry changes, the next step dispatches and prepares again."""
    attn = make_attention("decoder_self", spec, embed_dim=E, heads=H, max_positions=64)
    torch.manual_seed(7)
    x = torch.randn(TQ, B, E)
    prepared = PreparedRuns(monkeypatch)
    short = decode_self(attn, x, True, monkeypatch)
    assert prepared.count == TQ - 1
    whole = decode_self(attn, x, False, monkeypatch)
    torch.testing.assert_close(short, whole, atol=0, rtol=0)
    from localnmt.attention.problem import REGISTRY

    REGISTRY.arrange(REGISTRY.names())  # the same order, a new revision
    again = decode_self(attn, x, True, monkeypatch)
    # the kernel kept from the first run stood aside at the first step (not counted: a first
    # step is never prepared), which prepared again for the steps after it
    assert prepared.count == 2 * (TQ - 1)
    torch.testing.assert_close(again, whole, atol=0, rtol=0)


def test_sdpa_prepares_plain_problems_only():
    """SDPA's prepared form takes queries, keys and values alone: any mask, bias, dropout or
    shared key rows, and the registry dispatches every call."""
    from localnmt.attention.context import AttentionSite
    from localnmt.attention.fast import sdpa
    from localnmt.attention.problem import AttentionProblem

    site = AttentionSite("decoder_self", 0, 1, E, H)
    q, k, v = one_query_heads()
    plain = AttentionProblem(site=site, q=q, k=k, v=v)
    call = sdpa.prepare(plain)
    assert call is not None
    torch.testing.assert_close(call(q, k, v), sdpa.sdpa_kernel(plain), atol=0, rtol=0)
    others = {
        "padding": {"key_padding_mask": torch.zeros(B, k.size(2), dtype=torch.bool)},
        "causal": {"causal": True},
        "allowed": {"allowed": torch.ones(1, 1, 1, k.size(2), dtype=torch.bool)},
        "bias": {"dense_bias": torch.zeros(1, 1, 1, k.size(2))},
        "dropout": {"dropout_p": 0.1},
    }
    for what, fields in others.items():
        assert sdpa.prepare(replace(plain, **fields)) is None, what


def test_relative_step_rows_follow_the_tables_and_the_length(monkeypatch):
    """The step's table rows come from a longer gather kept between steps: they are the rows
    of the step's own buckets at every length, past the kept one too, and after the tables
    are written to (a training step between two decoding runs)."""
    from localnmt.attention.methods import rel_pos

    attn = make_attention("decoder_self", "rel_pos[clip=3]", embed_dim=E, heads=H)
    method, cpu = attn.modifiers[0], torch.device("cpu")

    def gathered(keys: int) -> tuple[torch.Tensor, torch.Tensor]:
        return method._rows(rel_pos._step_buckets(3, keys, cpu))

    with torch.no_grad():
        for keys in (1, 5, 64, 65, 200, 2):
            for got, expected in zip(method.step_key_value_terms(keys, cpu, True),
                                     gathered(keys)):  # fmt: skip
                torch.testing.assert_close(got, expected, atol=0, rtol=0)
        method.rel_key.weight.add_(1.0)
        method.rel_value.weight.mul_(2.0)
        for got, expected in zip(method.step_key_value_terms(9, cpu, True), gathered(9)):
            torch.testing.assert_close(got, expected, atol=0, rtol=0)


def test_relative_steps_with_parametrized_tables_follow_them(monkeypatch):
    """Tables under ``torch.nn.utils.parametrize`` are computed anew at each access (no
    address or version tells a change): the shortcut gathers them at every step, and the
    steps stay the pipeline's after the underlying parameter is written to."""
    from torch.nn.utils import parametrize

    class Doubled(torch.nn.Module):
        def forward(self, weight: torch.Tensor) -> torch.Tensor:
            return 2 * weight

    attn = make_attention("decoder_self", "rel_pos[clip=2]", embed_dim=E, heads=H)
    method = attn.modifiers[0]
    parametrize.register_parametrization(method.rel_key, "weight", Doubled())
    torch.manual_seed(6)
    x = torch.randn(TQ, B, E)
    for _ in range(2):
        short = decode_self(attn, x, True, monkeypatch)
        whole = decode_self(attn, x, False, monkeypatch)
        torch.testing.assert_close(short, whole, atol=0, rtol=0)
        with torch.no_grad():
            method.rel_key.parametrizations.weight.original.add_(1.0)


def one_query_heads(keys: int = 7):
    """``q`` ``(B, H, 1, d)``, ``k`` and ``v`` ``(B, H, keys, d)``."""
    d = E // H
    return torch.randn(B, H, 1, d), torch.randn(B, H, keys, d), torch.randn(B, H, keys, d)


def test_relative_steps_of_the_functional_form_take_the_shortcut(monkeypatch):
    """transformers' decoder self-attention step: one query, the cached keys, no state."""
    from localnmt.attention.layers import local_attention

    attn = make_attention("decoder_self", "rel_pos[clip=3]", embed_dim=E, heads=H)
    torch.manual_seed(5)
    q, k, v = (
        torch.randn(B, H, 1, E // H),
        torch.randn(B, H, 7, E // H),
        torch.randn(B, H, 7, E // H),
    )
    calls = PipelineCalls(monkeypatch)
    outs = []
    with torch.no_grad():
        for shortcut in (True, False):
            monkeypatch.setattr(step_plan, "ENABLED", shortcut)
            outs.append(local_attention(attn, q, k, v)[0])
    assert calls.count == 1
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)


@pytest.mark.parametrize(
    "case", ["padding", "gradients", "encoder site", "weights", "another method"]
)
def test_relative_steps_the_shortcut_leaves_to_the_pipeline(case, monkeypatch):
    """Padding (rows apart), gradients (no fold), a non-causal site whose one query need not
    be the last key, weights asked, a second method: the pipeline runs."""
    from localnmt.attention.layers import local_attention

    kind = "encoder_self" if case == "encoder site" else "decoder_self"
    spec = "rel_pos[clip=3] + localness" if case == "another method" else "rel_pos[clip=3]"
    attn = make_attention(kind, spec, embed_dim=E, heads=H)
    torch.manual_seed(6)
    q, k, v = (
        torch.randn(B, H, 1, E // H),
        torch.randn(B, H, 7, E // H),
        torch.randn(B, H, 7, E // H),
    )
    pad = padding_mask([7, 5, 6], 7, "left") if case == "padding" else None
    calls = PipelineCalls(monkeypatch)
    with torch.set_grad_enabled(case == "gradients"):
        local_attention(attn, q, k, v, key_padding_mask=pad, need_weights=case == "weights")
    assert calls.count == 1


def test_a_new_plan_for_the_same_or_moved_source_takes_over_its_groups(monkeypatch):
    """The groups of equal source rows are found once per decoding run: a plan kept for the
    same keys, or for the ones a reorder within groups moved them to, takes them over."""
    attn, x, q, k, v, pad, state = step_problem_inputs()
    found = []
    real = step_plan.source_group
    monkeypatch.setattr(step_plan, "source_group", lambda *a: found.append(1) or real(*a))
    reorder_buffer(state, torch.tensor([0, 1, 2]), cross_attention=True, shares_source=False)
    first = state[step_plan.PLAN_KEY]
    assert found == [1] and first._group == 1 and first.moved
    moved_k, moved_v = k.clone(), v.clone()
    step_plan.keep(state, replace(first, k=moved_k, v=moved_v))
    assert state[step_plan.PLAN_KEY]._group == 1 and found == [1]
    step_plan.keep(state, replace(first, k=k[:1], v=v[:1]))
    assert state[step_plan.PLAN_KEY]._group is None  # another source: groups not known
    monkeypatch.setattr(step_plan, "ENABLED", False)
    step_plan.keep(state, first)
    assert step_plan.PLAN_KEY not in state  # plans off: none kept


@pytest.mark.parametrize("spec", ["hardcoded_gaussian", "gmm[k=3]"])
def test_the_plain_pytorch_layers_decode_alike_with_and_without_shortcuts(spec, monkeypatch):
    """``LocalSelfAttention`` (relative positions, causal) and ``LocalCrossAttention`` step by
    step with one cache, beam reorders within sentences between steps: bit for bit the same
    with the shortcuts and plans as through the pipeline, and the plans ran."""
    from localnmt.attention.layers import LocalCrossAttention, LocalSelfAttention, reorder_cache

    torch.manual_seed(0)
    memory = torch.randn(3, TK, E).repeat_interleave(2, 0)
    pad = padding_mask([TK, TK, 4, 4, TK - 2, TK - 2], TK, "right")
    x = torch.randn(6, TQ, E)
    cross = LocalCrossAttention(E, H, spec).eval()
    own = LocalSelfAttention(E, H, "rel_pos[clip=2]", causal=True).eval()
    layers = torch.nn.ModuleList([own, cross])
    runs = PlanRuns(monkeypatch)
    outs = []
    for shortcuts in (True, False):
        monkeypatch.setattr(step_plan, "ENABLED", shortcuts)
        cache: dict = {}
        steps = []
        with torch.no_grad():
            for t in range(TQ):
                if t in (2, 4):
                    reorder_cache(layers, cache, torch.tensor([1, 0, 3, 2, 4, 5]))
                y = own(x[:, t : t + 1], cache=cache)
                steps.append(cross(y, memory, memory_padding_mask=pad, cache=cache))
        outs.append(torch.cat(steps, dim=1))
    assert runs.count == TQ - 1
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)
