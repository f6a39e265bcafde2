"""bench.hf_attention: the families' placements, and one tiny run that prints a ratio per row."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers")

from bench import hf_attention  # noqa: E402
from bench.measure import ratio_quartiles  # noqa: E402
from localnmt.attention.attention_specs import AttentionSpecs  # noqa: E402


def test_papers_placement_puts_yangs_methods_in_the_lowest_three_encoder_layers():
    assert hf_attention.placed("block", "papers", 2) == {"encoder_self": "block[layers=1-2]"}
    for family, specs in hf_attention.FAMILIES.items():
        placed = hf_attention.placed(family, "papers")
        assert hf_attention.placed(family, "all") == specs
        if family in hf_attention.LOWER_THREE:
            (item,) = AttentionSpecs.parse(**placed).site("encoder_self").items
            assert item.layers == [0, 1, 2] and set(placed) == {"encoder_self"}
            assert placed["encoder_self"].replace("layers=1-3,", "").replace(
                "[layers=1-3]", "") == specs["encoder_self"]  # fmt: skip
        else:
            assert placed == specs


def test_a_tiny_run_prints_both_ratios_for_each_family(capsys):
    hf_attention.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "12",
                       "--new-tokens", "4", "--repeats", "1", "--placement", "papers",
                       "--families", "rel_pos", "block", "hardcoded_gaussian"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert "placement papers" in lines[0]  # block in layer 1 of 1
    rows = {
        m[1]: (float(m[2]), float(m[3]))
        for m in (re.match(r"(\w+)\s+([\d.]+)\s+([\d.]+)$", line) for line in lines)
        if m
    }
    assert set(rows) == {"rel_pos", "block", "hardcoded_gaussian"}
    assert all(r > 0 for pair in rows.values() for r in pair)


def test_control_row_and_spread_columns(capsys):
    """``--control`` times the sdpa model against a copy of itself first; ``--spread`` gives
    each ratio's quartiles, which bracket the median."""
    hf_attention.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "8",
                       "--new-tokens", "3", "--repeats", "3", "--families", "tied_qk",
                       "--control", "--spread"])  # fmt: skip
    pattern = r"(\w+)\s+([\d.]+)\s+([\d.]+)\s+spread: ([\d.]+)-([\d.]+) ([\d.]+)-([\d.]+)$"
    rows = [m.groups() for m in map(re.compile(pattern).match,
                                    capsys.readouterr().out.splitlines()) if m]  # fmt: skip
    assert [row[0] for row in rows] == ["sdpa_copy", "tied_qk"]
    for _, train, generate, *quartiles in rows:
        low_t, high_t, low_g, high_g = map(float, quartiles)
        assert low_t <= float(train) <= high_t and low_g <= float(generate) <= high_g


def test_ratio_quartiles_of_paired_ratios():
    assert ratio_quartiles([1.0, 2.0, 3.0, 4.0, 5.0], [1.0] * 5) == (2.0, 4.0)
    assert ratio_quartiles([3.0], [2.0]) == (1.5, 1.5)


def _tiny_gmm_run_without(name: str, capsys):
    """A tiny run of the GMM family with ``--without name``, traced; checks its output line."""
    from localnmt.attention import dispatch

    with dispatch.trace() as traced:
        hf_attention.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "8",
                           "--new-tokens", "3", "--repeats", "1", "--families", "gmm",
                           "--without", name])  # fmt: skip
    line = next(li for li in capsys.readouterr().out.splitlines() if li.startswith("gmm "))
    assert re.match(r"gmm\s+[\d.]+\s+[\d.]+\s+without: [\d.]+ [\d.]+$", line), line
    return traced


def test_without_a_kernel_times_the_model_with_it_out_of_its_registry(capsys):
    from localnmt.attention import mixture
    from localnmt.attention.fast.native import gmm_step

    kept = mixture.STEP_REGISTRY.names()
    traced = _tiny_gmm_run_without("gmm_c_attention", capsys)
    assert mixture.STEP_REGISTRY.names() == kept  # back in its registry after the run
    # the generate steps ran with the C step and, in the 'without' calls, the dense path
    expected = {"gmm_c_attention", "gmm_dense_step"} if gmm_step.ENABLED else {"gmm_dense_step"}
    assert set(traced.kernels("gmm step")) == expected
    with pytest.raises(SystemExit):
        hf_attention.main(["--without", "no_such_kernel"])


def test_without_a_named_path_turns_it_off_for_the_without_calls(capsys):
    """``--without gmm_predictors_in_c``: the 'without' calls' decoding steps read the
    predictors' outputs from torch (no trace detail), the others compute them in C; the
    switch is back on after the run."""
    from localnmt.attention.fast import gmm_mixture
    from localnmt.attention.fast.native import gmm_step

    traced = _tiny_gmm_run_without("gmm_predictors_in_c", capsys)
    assert gmm_mixture.PREDICTORS_IN_C
    details = {tuple(c.detail) for c in traced.calls if c.kernel == "gmm_c_attention"}
    assert details == ({("predictors in C",), ()} if gmm_step.ENABLED else set())


def test_without_step_shortcuts_every_step_builds_its_problem(capsys, monkeypatch):
    """``--without step_shortcuts``: the 'without' calls' decoding steps all run the whole
    pipeline; the others run kept plans after each layer's first step."""
    from localnmt.attention import step_plan
    from localnmt.attention.pipeline import LocalAttention

    built = {True: 0, False: 0}
    real = LocalAttention._problem

    def counted(attention, q_input, q, *args, **kwargs):
        built[step_plan.ENABLED] += q.size(2) == 1 and attention.encoder_decoder_attention
        return real(attention, q_input, q, *args, **kwargs)

    monkeypatch.setattr(LocalAttention, "_problem", counted)
    _tiny_gmm_run_without("step_shortcuts", capsys)
    assert step_plan.ENABLED
    assert built[False] > built[True] > 0


def test_beam_search_generate_runs_the_plans(capsys, monkeypatch):
    """``--beams 2``: beam search's generate, whose cross-attention steps after the first run
    the kept plans (the reorders move each source row within its sentence)."""
    from helpers.attention import PlanRuns

    runs = PlanRuns(monkeypatch)
    hf_attention.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "8",
                       "--new-tokens", "3", "--repeats", "1", "--families", "hardcoded_gaussian",
                       "--beams", "2"])  # fmt: skip
    assert "beams 2" in capsys.readouterr().out.splitlines()[0]
    assert runs.count > 0


def test_work_counts_the_linear_layers_products_and_not_attentions():
    import torch

    linear = torch.nn.Linear(4, 3)
    x, q = torch.randn(5, 4), torch.randn(1, 2, 6, 8)

    def layer_and_attention():
        linear(x)
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
        q @ q.transpose(-1, -2)

    assert hf_attention.matrix_work(layer_and_attention) == 2 * 5 * 4 * 3
    assert hf_attention.work_ratio(lambda: linear(x), lambda: linear(torch.cat([x, x]))) == 0.5


def test_work_columns_follow_the_ratios(capsys):
    hf_attention.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "12",
                       "--new-tokens", "4", "--repeats", "1", "--families", "block", "rel_pos",
                       "--work"])  # fmt: skip
    rows = {
        m[1]: (float(m[2]), float(m[3]))
        for m in (
            re.match(r"(\w+)\s+[\d.]+\s+[\d.]+\s+work: ([\d.]+) ([\d.]+)$", line)
            for line in capsys.readouterr().out.splitlines()
        )  # fmt: skip
        if m
    }
    # BLOCK's summaries and gate are linear layers of its own; rel_pos adds none
    assert rows["block"][0] < 1.0 and rows["block"][1] < 1.0
    assert rows["rel_pos"] == (1.0, 1.0)


def test_hf_calls_times_each_site_at_a_step_and_over_a_sequence(capsys):
    from transformers import AttentionInterface

    from bench import hf_calls
    from localnmt.hf.attention import NAME, localnmt_attention

    hf_calls.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "12",
                   "--new-tokens", "4", "--calls", "2", "--repeats", "1",
                   "--families", "rel_pos", "gmm", "tied_qk"])  # fmt: skip
    row = re.compile(r"(\w+)\s+(\w+)\s+(step|sequence)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+$")
    rows = {
        (m[1], m[2], m[3]): (int(m[4]), float(m[5]), float(m[6]))
        for m in map(row.match, capsys.readouterr().out.splitlines())
        if m
    }
    assert set(rows) == {
        ("rel_pos", "encoder_self", "sequence"), ("rel_pos", "decoder_self", "sequence"),
        ("rel_pos", "decoder_self", "step"), ("gmm", "cross", "sequence"), ("gmm", "cross", "step"),
        ("tied_qk", "encoder_self", "sequence"),  # two query / key groups for four heads
    }  # fmt: skip
    assert rows[("rel_pos", "decoder_self", "step")][0] == 4  # the longest cache of generate
    assert rows[("gmm", "cross", "step")][0] == 12  # the source
    assert all(ours > 0 and theirs > 0 for _, ours, theirs in rows.values())
    assert AttentionInterface._global_mapping[NAME] is localnmt_attention  # registered back


def test_hf_calls_without_step_shortcuts_times_the_pipeline_too(capsys, monkeypatch):
    """``--without step_shortcuts``: a column of the same kept calls with every call through
    the whole pipeline (the kept plan's step builds its problem there, not in the others)."""
    from bench import hf_calls
    from localnmt.attention import step_plan
    from localnmt.attention.pipeline import LocalAttention

    built = {True: 0, False: 0}
    real = LocalAttention._problem

    def counted(attention, *args, **kwargs):
        built[step_plan.ENABLED] += attention.encoder_decoder_attention
        return real(attention, *args, **kwargs)

    monkeypatch.setattr(LocalAttention, "_problem", counted)
    hf_calls.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "12",
                   "--new-tokens", "4", "--calls", "3", "--repeats", "1",
                   "--families", "hardcoded_gaussian", "--without", "step_shortcuts"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert "without µs" in lines[1]
    step = next(li for li in lines if li.startswith("hardcoded_gaussian") and " step " in li)
    assert re.match(r"\S+\s+cross\s+step\s+12(\s+[\d.]+){4}$", step), step
    assert step_plan.ENABLED and built[False] >= 3 * 2  # every timed call without, warm-up too
