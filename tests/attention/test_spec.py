"""Spec handling at model build: each site's string parsed once and shared by every layer;
validation on the parsed options, without building a module."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY

from localnmt.attention import attention_specs
from localnmt.attention import spec as spec_module
from localnmt.attention.context import AttentionSite
from localnmt.attention.modifier import AttentionModifier, SpecError
from localnmt.fairseq_plugin import transformer

SPECS = {
    "--encoder-attn-modifiers": "localness[layers=1-2] + rel_pos[clip=2]",
    "--decoder-attn-modifiers": "local_heads[masks=prev1;next1;band1;global] + rel_pos",
    "--cross-attn-modifiers": "gmm[k=2,layers=2-3]",
}
SIZES = ["--encoder-layers", "3", "--decoder-layers", "3"]


def _args(extra: list[str]):
    parser = options.get_training_parser()
    argv = ["/nonexistent", "--arch", "localnmt_tiny", "--share-all-embeddings", *extra]
    return options.parse_args_and_arch(parser, argv)


def _task():
    d = Dictionary()
    for i in range(20):
        d.add_symbol(f"w{i}")
    return SimpleNamespace(source_dictionary=d, target_dictionary=d)


def _spec_args() -> list[str]:
    return [*SIZES, *(x for flag, text in SPECS.items() for x in (flag, text))]


def _count_calls(monkeypatch, module, name: str) -> Counter:
    calls: Counter = Counter()
    real = getattr(module, name)

    def counted(arg, *rest, **kw):
        calls[arg if isinstance(arg, str) or arg is None else getattr(arg, "name", arg)] += 1
        return real(arg, *rest, **kw)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_each_site_is_parsed_once_from_command_line_to_layers(monkeypatch):
    """argparse's check of the flags, the model's check and every layer share one parse of
    each string (no per-layer parse, no second parse at build)."""
    attention_specs.parse_site.cache_clear()
    parses = _count_calls(monkeypatch, attention_specs, "parse_spec")
    options_built = _count_calls(monkeypatch, spec_module, "build_options")
    args = _args(_spec_args())
    model = ARCH_MODEL_REGISTRY["localnmt_tiny"].build_model(args, _task())
    assert parses == Counter(SPECS.values())  # one parse per site, none per layer
    # each item's options dataclass is built once, by that parse (5 items in the 3 specs)
    assert sum(options_built.values()) == 5
    # every layer got its modifiers from the shared parse
    assert [m.name for m in model.encoder.layers[0].self_attn.modifiers] == [
        "localness",
        "rel_pos",
    ]
    assert [m.name for m in model.encoder.layers[2].self_attn.modifiers] == ["rel_pos"]
    cross = [[m.name for m in layer.encoder_attn.modifiers] for layer in model.decoder.layers]
    assert cross == [[], ["gmm"], ["gmm"]]
    # each module owns its options (a copy of the parsed ones)
    first, second = (layer.encoder_attn.modifiers[0] for layer in model.decoder.layers[1:])
    assert first.options == second.options and first.options is not second.options


def test_validation_builds_no_module(monkeypatch):
    args = _args(_spec_args())
    built: list[str] = []
    real_init = AttentionModifier.__init__

    def spy(self, *a, **kw):
        built.append(type(self).__name__)
        real_init(self, *a, **kw)

    monkeypatch.setattr(AttentionModifier, "__init__", spy)
    specs = transformer.check_model_specs(args)
    assert built == [] and set(specs.texts().values()) == set(SPECS.values())
    site = AttentionSite("cross", 1, num_layers=3, embed_dim=32, num_heads=4)
    spec_module.validate_specs(list(specs.site("cross").items), site)
    assert built == []
    modules = spec_module.build_modifiers(list(specs.site("cross").items), site)
    assert built == ["GaussianMixture"] and sum(p.numel() for m in modules for p in m.parameters())


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--encoder-attn-modifiers", "nope"], "unknown attention method 'nope'"),
        (["--encoder-attn-modifiers", "rel_pos[cap=2]"], "unknown option 'cap'"),
        (["--cross-attn-modifiers", "gmm[variant=exact]"], "must be one of approx, norm"),
        (["--cross-attn-modifiers", "gmm[k=0]"], "must be >= 1"),
        (["--encoder-attn-modifiers", "gmm"], "does not apply to encoder_self"),
        (["--encoder-attn-modifiers", "local_heads[masks=prev1]"], "1 masks for 4 heads"),
        (["--encoder-attn-modifiers", "local_heads[heads=1-2,masks=prev1]"], "selected heads"),
        (["--encoder-attn-modifiers", "tied_qk[heads=1,groups=1]"], "no heads= option"),
        (["--encoder-attn-modifiers", "tied_qk[groups=3]"], "must divide the 4 heads"),
        (["--decoder-attn-modifiers", "rel_pos[layers=3]"], "valid: 1-2"),
        (["--encoder-attn-modifiers", "rel_pos[heads=5]"], "valid: 1-4"),
        (["--encoder-embed-dim", "30"], "not divisible by 4 heads"),
    ],
)
def test_spec_errors_exit_2_before_any_module(monkeypatch, capsys, extra, message):
    """The messages of parsing and validation, from ``build_model`` (the argparse check of the
    flags is bypassed: a preset or a checkpoint can hold the bad spec)."""
    args = _args([])
    flags = dict(zip(extra[::2], extra[1::2], strict=True))
    for flag, value in flags.items():
        dest = flag[2:].replace("-", "_")
        setattr(args, dest, int(value) if value.isdigit() else value)

    def fail(self, *a, **kw):
        raise AssertionError("a module was built before the spec was checked")

    monkeypatch.setattr(AttentionModifier, "__init__", fail)
    with pytest.raises(SystemExit) as exc:
        ARCH_MODEL_REGISTRY["localnmt_tiny"].build_model(args, _task())
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("fairseq: error: ") and message in err


def test_direct_spec_errors_name_what_to_fix():
    site = AttentionSite("encoder_self", 0, num_layers=1, embed_dim=32, num_heads=4)
    with pytest.raises(SpecError, match="valid: prevK"):
        spec_module.parse_spec("local_heads[masks=left3]")
    with pytest.raises(SpecError, match="3 masks for 4 heads"):
        spec_module.validate_specs(spec_module.parse_spec("local_heads[masks=prev1*3]"), site)


def test_encoder_built_outside_a_model_parses_its_spec_once(monkeypatch):
    """``LocalTransformerEncoder`` on its own (as RoBERTa builds it) parses once for all
    layers."""
    from fairseq.models.transformer import TransformerConfig
    from torch import nn

    attention_specs.parse_site.cache_clear()
    parses = _count_calls(monkeypatch, attention_specs, "parse_spec")
    args = _args([*SIZES, "--encoder-attn-modifiers", "rel_pos[clip=2]"])
    task = _task()
    embed = nn.Embedding(len(task.source_dictionary), 32, padding_idx=1)
    cfg = TransformerConfig.from_namespace(args)
    encoder = transformer.LocalTransformerEncoder(cfg, task.source_dictionary, embed)
    assert parses == Counter({"rel_pos[clip=2]": 1})
    assert all(layer.self_attn.modifiers[0].name == "rel_pos" for layer in encoder.layers)
    torch.testing.assert_close(
        encoder.layers[0].self_attn.modifiers[0].options.clip, 2, check_dtype=False
    )
