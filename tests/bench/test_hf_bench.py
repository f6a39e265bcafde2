"""bench.hf_attention: the families' placements, and one tiny run that prints a ratio per row."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers")

from bench import hf_attention  # noqa: E402
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


def test_without_a_kernel_times_the_model_with_it_out_of_its_registry(capsys):
    from localnmt.attention import dispatch, mixture
    from localnmt.attention.fast.native import gmm_step

    kept = mixture.STEP_REGISTRY.names()
    with dispatch.trace() as traced:
        hf_attention.main(["--dim", "16", "--layers", "1", "--batch", "2", "--length", "8",
                           "--new-tokens", "3", "--repeats", "1", "--families", "gmm",
                           "--without", "gmm_c_attention"])  # fmt: skip
    line = next(li for li in capsys.readouterr().out.splitlines() if li.startswith("gmm "))
    assert re.match(r"gmm\s+[\d.]+\s+[\d.]+\s+without: [\d.]+ [\d.]+$", line), line
    assert mixture.STEP_REGISTRY.names() == kept  # back in its registry after the run
    # the generate steps ran with the C step and, in the 'without' calls, the dense path
    expected = {"gmm_c_attention", "gmm_dense_step"} if gmm_step.ENABLED else {"gmm_dense_step"}
    assert set(traced.kernels("gmm step")) == expected
    with pytest.raises(SystemExit):
        hf_attention.main(["--without", "no_such_kernel"])
