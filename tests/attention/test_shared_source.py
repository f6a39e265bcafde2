"""Cross-attention keys stored once per group of hypotheses with the same source.

The reference is the same module with the shortcut switched off (one key row per
hypothesis, as fairseq stores them), on beam-search-shaped batches: each sentence's encoder
rows repeated ``beam`` times, reordered within sentences, then a sentence dropped.
"""

from __future__ import annotations

import pytest
import torch

from localnmt.attention import AttentionSite, LocalAttention, shared_source
from localnmt.attention.shared_source import (
    GROUP_KEY,
    encoder_rows,
    first_step_group,
    group_of_runs,
    grouped_matmul,
    regroup,
    source_group,
)
from localnmt.attention.spec import build_modifiers, parse_spec

E, H, TK, BEAM = 16, 4, 7, 3


def test_group_is_the_gcd_of_the_run_starts():
    def group(values: list[int]) -> int:
        rows = torch.tensor(values)
        return group_of_runs(rows[1:] == rows[:-1], len(values))

    assert group([0, 0, 0, 1, 1, 1]) == 3
    assert group([0, 0, 0, 0, 0, 0, 1, 1, 1]) == 3  # two equal sentences side by side
    assert group([0, 0, 1, 1, 1, 1]) == 2
    assert group([0, 0, 0, 1, 1]) == 1  # runs of 3 and 2
    assert group([4, 4, 4, 4]) == 4
    assert group([0, 1, 2]) == 1


def test_source_group_compares_keys_values_and_padding():
    torch.manual_seed(0)
    src = torch.randn(TK, 2, E).repeat_interleave(BEAM, dim=1)
    pad = torch.zeros(2 * BEAM, TK, dtype=torch.bool)
    assert source_group(src, src, pad) == BEAM
    assert source_group(src, src, None) == BEAM
    other_pad = pad.clone()
    other_pad[1, 0] = True  # one hypothesis's padding differs
    assert source_group(src, src, other_pad) == 1
    other_value = src.clone()
    other_value[0, 4, 0] += 1
    assert source_group(src, other_value, pad) == 1
    nan = src.clone()
    nan[:, :BEAM] = float("nan")  # NaN equals nothing: no shortcut
    assert source_group(nan, nan, pad) == 1
    assert source_group(src[:, :1], src[:, :1], None) == 1


def test_regroup_keeps_the_rows_still_read():
    keep, group = regroup(torch.tensor([2, 2, 2, 0, 0, 0]))
    assert keep.tolist() == [2, 0] and group == 3
    keep, group = regroup(torch.tensor([1, 1, 0]))
    assert keep.tolist() == [1, 1, 0] and group == 1  # runs of 2 and 1: one row each
    keep, group = regroup(torch.tensor([5]))
    assert keep.tolist() == [5] and group == 1


def test_grouped_matmul_is_the_per_row_product():
    torch.manual_seed(0)
    a = torch.randn(6, 2, 3, 5)
    b = torch.randn(2, 2, 5, 4)
    expected = torch.matmul(a, b.repeat_interleave(3, dim=0))
    torch.testing.assert_close(grouped_matmul(a, b, 3), expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(grouped_matmul(a, b.repeat_interleave(3, 0), 1), expected)


def _attention(spec: str) -> LocalAttention:
    torch.manual_seed(0)
    site = AttentionSite("cross", 0, 1, E, H)
    modifiers = build_modifiers(parse_spec(spec), site) if spec else None
    return LocalAttention(
        E, H, site=site, modifiers=modifiers, encoder_decoder_attention=True
    ).eval()


def _decode(attn: LocalAttention, need_weights: bool) -> tuple[list, list[dict]]:
    """Four steps over 3 sentences × BEAM hypotheses (left-padded sources of 7, 5, 2
    tokens): reordered within sentences after step 1, sentence 1 dropped after step 2."""
    torch.manual_seed(1)
    src = (torch.randn(TK, 3, E) * 2).repeat_interleave(BEAM, dim=1)
    pad = torch.zeros(3, TK, dtype=torch.bool)
    pad[1, :2] = pad[2, :5] = True
    pad = pad.repeat_interleave(BEAM, dim=0)
    queries = torch.randn(4, 3 * BEAM, E)
    within = torch.tensor([2, 0, 0, 4, 5, 3, 8, 8, 7])
    dropped = torch.tensor([0, 1, 2, 6, 7, 8])
    state: dict = {}
    outputs, buffers = [], []
    rows = torch.arange(3 * BEAM)
    for step in range(4):
        out, weights = attn(queries[step, rows][None], src[:, rows], src[:, rows],
                            key_padding_mask=pad[rows], incremental_state=state,
                            static_kv=True, need_weights=need_weights)  # fmt: skip
        outputs.append((out, weights))
        buffers.append(dict(attn._get_input_buffer(state)))
        order = within if step == 0 else dropped if step == 1 else None
        if order is not None:
            attn.reorder_incremental_state(state, order)
            rows = rows[order]
    return outputs, buffers


@pytest.mark.parametrize("spec", ["", "gmm[k=2]", "gmm[k=2,variant=norm]",
                                  "hardcoded_gaussian[std=1.5]"])  # fmt: skip
@pytest.mark.parametrize("need_weights", [False, True])
def test_incremental_decoding_equals_keys_per_hypothesis(spec, need_weights, monkeypatch):
    attn = _attention(spec)
    shared, buffers = _decode(attn, need_weights)
    monkeypatch.setattr(shared_source, "ENABLED", False)
    reference, ref_buffers = _decode(attn, need_weights)
    for (out, weights), (out_ref, weights_ref) in zip(shared, reference):
        torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=0)
        if need_weights:
            torch.testing.assert_close(weights, weights_ref, atol=1e-6, rtol=0)
    # stored once per sentence: 3 rows, then 2 after the drop; per hypothesis without it
    assert [b["prev_key"].size(0) for b in buffers] == [3, 3, 2, 2]
    assert [int(b[GROUP_KEY]) for b in buffers] == [BEAM] * 4
    assert [b["prev_key"].size(0) for b in ref_buffers] == [9, 9, 6, 6]
    assert all(GROUP_KEY not in b for b in ref_buffers)


def test_modifiers_that_read_keys_keep_a_row_per_hypothesis():
    attn = _attention("localness")
    assert attn.modifiers[0].reads_keys
    _, buffers = _decode(attn, need_weights=False)
    assert [b["prev_key"].size(0) for b in buffers] == [9, 9, 6, 6]


def test_a_drop_that_splits_a_group_regroups_per_hypothesis():
    """A reorder that is not beam search's (a sentence's hypotheses kept in part) is still
    exact: the stored rows are taken per hypothesis."""
    attn = _attention("")
    torch.manual_seed(2)
    src = torch.randn(TK, 2, E).repeat_interleave(2, dim=1)
    query = torch.randn(1, 4, E)
    state: dict = {}
    attn(query, src, src, incremental_state=state, static_kv=True)
    attn.reorder_incremental_state(state, torch.tensor([1, 2, 3]))
    out, _ = attn(query[:, 1:], src[:, 1:], src[:, 1:], incremental_state=state, static_kv=True)
    buffer = attn._get_input_buffer(state)
    assert buffer["prev_key"].size(0) == 3 and int(buffer[GROUP_KEY]) == 1
    expected, _ = attn(query[:, 1:], src[:, 1:], src[:, 1:])
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def _encoder_out(sentences: int, beam: int) -> dict:
    torch.manual_seed(3)
    pad = torch.zeros(sentences, TK, dtype=torch.bool)
    pad[0, :2] = True
    return {
        "encoder_out": [torch.randn(TK, sentences, E).repeat_interleave(beam, dim=1)],
        "encoder_padding_mask": [pad.repeat_interleave(beam, dim=0)],
        "encoder_embedding": [torch.randn(sentences, TK, E).repeat_interleave(beam, dim=0)],
        "encoder_states": [],
        "src_tokens": [torch.randint(4, 9, (sentences, TK)).repeat_interleave(beam, dim=0)],
        "src_lengths": [],
    }


def test_first_step_group_needs_equal_tokens_and_sources():
    out = _encoder_out(3, BEAM)
    eos = torch.full((3 * BEAM, 1), 2)
    assert first_step_group(eos, out) == BEAM
    prefix = eos.clone()
    prefix[1] = 5  # a forced prefix that differs within a sentence
    assert first_step_group(prefix, out) == 1
    assert first_step_group(torch.full((3 * BEAM, 2), 2), out) == 1  # not a first step
    assert first_step_group(eos, None) == 1
    assert first_step_group(eos, {**out, "other": []}) == 1  # not fairseq's Transformer's


def test_encoder_rows_takes_each_entry_along_its_batch_axis():
    out = _encoder_out(2, BEAM)
    rows = torch.tensor([0, BEAM])
    taken = encoder_rows(out, rows)
    assert taken["encoder_out"][0].shape == (TK, 2, E)
    torch.testing.assert_close(taken["encoder_out"][0], out["encoder_out"][0][:, ::BEAM])
    for name in ("encoder_padding_mask", "encoder_embedding", "src_tokens"):
        torch.testing.assert_close(taken[name][0], out[name][0][::BEAM])
    assert taken["encoder_states"] == [] and out["encoder_out"][0].size(1) == 2 * BEAM
    hidden = torch.randn(TK, 2 * BEAM, E)
    taken = encoder_rows({**out, "fc_results": [None, hidden]}, rows)  # layers without one
    assert taken["fc_results"][0] is None
    torch.testing.assert_close(taken["fc_results"][1], hidden[:, ::BEAM])
