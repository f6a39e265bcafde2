"""Catalog rows and presets carry typed attention specs; fairseq flags are derived from them."""

from __future__ import annotations

import pytest

from localnmt.attention.attention_specs import AttentionSpecs
from localnmt.catalog import CatalogRow, get_row
from localnmt.catalog.files import read_paper
from localnmt.config_files import ConfigError


def test_rows_hold_parsed_specs_and_derive_the_same_flags():
    row = get_row("yang2018/table-4/localness-rel-pos/base")
    assert row.attention.encoder_self.methods == ["localness", "rel_pos"]
    assert row.attention.cross.text == "rel_pos" and row.model_args == ()
    shaw = get_row("shaw2018/table-1/relative-k-16/base")
    assert shaw.model_args == ("--no-token-positional-embeddings",)
    assert shaw.args == ("--encoder-attn-modifiers", "rel_pos[clip=16]",
                         "--decoder-attn-modifiers", "rel_pos[clip=16]",
                         "--no-token-positional-embeddings")  # fmt: skip
    assert CatalogRow.from_json(shaw.to_json()) == shaw


def test_a_bad_spec_in_a_config_names_file_and_row(tmp_path, monkeypatch):
    path = tmp_path / "zz2025.yaml"
    row = "    arch: localnmt_base\n    args: [--cross-attn-modifiers, 'gmm[k=x]']\n"
    path.write_text(
        "paper: zz2025\nrows:\n  - table: Table 1\n    row: Mine\n    size: base\n" + row
    )
    read_paper(path)  # the file's schema is fine
    monkeypatch.setenv("LOCALNMT_CONFIGS", str(tmp_path))
    from localnmt.catalog import paper_rows

    with pytest.raises(
        ConfigError, match=r"zz2025.yaml: rows\[0\] \(Table 1 / Mine\): .*expects int"
    ):
        paper_rows("zz2025")


def test_presets_are_typed_and_match_what_fairseq_builds():
    from fairseq.models import ARCH_CONFIG_REGISTRY

    from localnmt.fairseq_plugin.architectures import arch_stacks, preset_specs

    assert preset_specs("zhang2021_gmm_base") == AttentionSpecs.parse(cross="gmm")
    assert preset_specs("localnmt_base") == AttentionSpecs()
    for arch in ("yang2018_localness_base", "pande2021_half_tied", "pande2021_bert_band6_alltied"):
        import argparse

        ns = argparse.Namespace()
        ARCH_CONFIG_REGISTRY[arch](ns)
        assert AttentionSpecs.from_namespace(ns).texts() == preset_specs(arch).texts(), arch
    encoder, decoder = arch_stacks("localnmt_big", ["--encoder-attention-heads", "4", "--lr", "1"])
    assert (encoder.layers, encoder.heads, encoder.embed_dim) == (6, 4, 1024)
    assert decoder is not None and decoder.heads == 16
    assert arch_stacks("pande2021_bert_band6_alltied")[1] is None  # encoder only
