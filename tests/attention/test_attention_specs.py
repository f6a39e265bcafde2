"""AttentionSpecs: the three sites' specs as one typed value, parsed once per string, checked
against a model's sizes by the spec code, turned into fairseq flags only at the edge."""

from __future__ import annotations

import pytest

from localnmt.attention import attention_specs as specs_module
from localnmt.attention.attention_specs import AttentionSpecs, Stack, parse_site
from localnmt.attention.modifier import SpecError

BASE = Stack(layers=6, heads=8, embed_dim=512)


def test_flags_round_trip_in_site_order_and_the_rest_is_kept():
    argv = ("--lr", "1", "--cross-attn-modifiers", "gmm[k=2]", "--encoder-attn-modifiers=rel_pos",
            "--no-token-positional-embeddings")  # fmt: skip
    specs, rest = AttentionSpecs.from_fairseq_args(argv)
    assert rest == ("--lr", "1", "--no-token-positional-embeddings")
    assert specs.decoder_self is None and specs.cross.methods == ["gmm"]
    assert specs.to_fairseq_args() == [
        "--encoder-attn-modifiers", "rel_pos", "--cross-attn-modifiers", "gmm[k=2]",
    ]  # fmt: skip
    assert AttentionSpecs.from_fairseq_args(specs.to_fairseq_args()) == (specs, ())
    with pytest.raises(SpecError, match="--cross-attn-modifiers needs a spec"):
        AttentionSpecs.from_fairseq_args(["--cross-attn-modifiers"])


def test_a_string_is_parsed_once_per_process(monkeypatch):
    parse_site.cache_clear()
    calls = []
    real = specs_module.parse_spec
    monkeypatch.setattr(specs_module, "parse_spec", lambda t: calls.append(t) or real(t))
    first = AttentionSpecs.parse(encoder_self="localness[layers=1-3]")
    again = AttentionSpecs.from_fairseq_args(["--encoder-attn-modifiers", "localness[layers=1-3]"])
    assert calls == ["localness[layers=1-3]"]
    assert first == again[0] and first.encoder_self.items is again[0].encoder_self.items


def test_over_keeps_the_given_sites_and_an_explicit_none():
    preset = AttentionSpecs.parse(encoder_self="localness", cross="gmm")
    row = AttentionSpecs.parse(cross="")  # the row turns the preset's cross-attention off
    merged = row.over(preset)
    assert merged.texts() == {"encoder_self": "localness", "decoder_self": "", "cross": ""}
    assert not merged.site("cross") and merged.site("encoder_self").methods == ["localness"]
    assert AttentionSpecs().over(preset) == preset and not AttentionSpecs()


@pytest.mark.parametrize(
    "texts, encoder, decoder, message",
    [
        ({"encoder_self": "localness[layers=7]"}, BASE, BASE, "valid: 1-6"),
        ({"cross": "gmm[heads=9]"}, BASE, BASE, "valid: 1-8"),
        ({"encoder_self": "gmm"}, BASE, BASE, "does not apply to encoder_self"),
        ({"encoder_self": "local_heads[masks=band1*12]"}, BASE, BASE, "12 masks for 8 heads"),
        ({"decoder_self": "rel_pos"}, BASE, None, "this model has no decoder"),
        ({}, Stack(6, 8, 500), BASE, "embedding dim 500 is not divisible by 8 heads"),
    ],
)
def test_check_uses_the_spec_codes_messages(texts, encoder, decoder, message):
    with pytest.raises(SpecError, match=message):
        AttentionSpecs.from_mapping(texts).check(encoder, decoder)


def test_check_passes_a_fitting_model_and_knows_the_sites():
    AttentionSpecs.parse("localness[layers=1-3] + rel_pos", "rel_pos", "gmm[k=2]").check(BASE, BASE)
    AttentionSpecs.parse(encoder_self="local_heads[masks=band6*12]").check(Stack(12, 12, 768))
    with pytest.raises(SpecError, match="unknown attention site 'encoder'"):
        AttentionSpecs.from_mapping({"encoder": "rel_pos"})
    with pytest.raises(SpecError, match="unknown option 'cap'"):
        AttentionSpecs.parse(cross="gmm[cap=1]")
