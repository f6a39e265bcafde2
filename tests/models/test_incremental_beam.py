"""Beam search with incremental decoding gives the hypotheses of decoding without it.

Incremental decoding takes shortcuts that the full forward does not: source-only tensors
computed once per sentence (GMM cross-attention), relative-position buckets shared by every
hypothesis of a step (rel_pos), cross-attention keys cached in their own layout and once per
sentence instead of per hypothesis, the first step run once per sentence
(attention/shared_source.py). The
reference decodes with fairseq's ``SequenceGenerator`` told that the model has no
incremental state, so every step re-runs the whole decoder over the prefix (the general
path); both must choose the same hypotheses with the same scores.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

SMALL = [
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--encoder-layers", "2", "--decoder-layers", "2", "--dropout", "0",
]  # fmt: skip
REL_POS = [
    "--encoder-attn-modifiers", "rel_pos[clip=3]", "--decoder-attn-modifiers", "rel_pos[clip=3]",
    "--no-token-positional-embeddings",
]  # fmt: skip


def _build(arch: str, extra: list[str]):
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_REGISTRY

    d = Dictionary()
    for i in range(24):
        d.add_symbol(f"w{i}")
    parser = options.get_training_parser()
    argv = ["/nonexistent", "--arch", arch, "--share-all-embeddings", *SMALL, *extra]
    args = options.parse_args_and_arch(parser, argv)
    task = SimpleNamespace(source_dictionary=d, target_dictionary=d)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task).eval(), d


def _sample(d, lengths: list[int], total: int) -> dict:
    """A left-padded source batch, as fairseq collates it."""
    gen = torch.Generator().manual_seed(5)
    src = torch.full((len(lengths), total), d.pad())
    for b, n in enumerate(lengths):
        src[b, total - n :] = torch.randint(d.nspecial, len(d), (n,), generator=gen)
        src[b, -1] = d.eos()
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor(lengths)}}


def _beam(model, d, sample: dict, incremental: bool) -> list:
    from fairseq.sequence_generator import SequenceGenerator

    generator = SequenceGenerator([model], d, beam_size=4, max_len_a=0, max_len_b=24, min_len=6)
    if not incremental:  # every step runs the decoder over the whole prefix
        generator.model.has_incremental = False
    with torch.no_grad():
        return generator.generate([model], sample)


@pytest.mark.parametrize(
    "arch,extra",
    [
        ("zhang2021_gmm_base", []),
        ("zhang2021_gmm_norm_base", []),
        ("zhang2021_synthesis_base", []),
        ("zhang2021_hardcoded_base", []),
        ("zhang2021_localness_base", []),
        ("localnmt_base", REL_POS),
        ("localnmt_base", []),
    ],
    ids=["gmm", "gmm-norm", "synthesis", "hardcoded", "localness-cross", "rel-pos", "plain"],
)
def test_beam_search_equals_decoding_without_incremental_state(arch, extra, monkeypatch):
    from localnmt.attention import incremental, shared_source
    from localnmt.attention.fast.native import gmm_step
    from localnmt.attention.methods.gmm import GaussianMixture
    from localnmt.attention.methods.rel_pos import RelativePosition

    model, d = _build(arch, extra)
    sample = _sample(d, [9, 6, 3], 9)
    shortcuts = {"source cached": 0, "step buckets": 0, "fused C step": 0,
                 "first step per sentence": 0, "keys regrouped": 0}  # fmt: skip

    def counted(cls, name: str, label: str, hit) -> None:
        original = getattr(cls, name)

        def spy(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            shortcuts[label] += bool(hit(result))
            return result

        monkeypatch.setattr(cls, name, spy)

    counted(GaussianMixture, "get_source_state", "source cached", lambda r: r is not None)
    counted(RelativePosition, "step_buckets", "step buckets", lambda r: r is not None)
    counted(RelativePosition, "step_key_value_terms", "step buckets", lambda r: r is not None)
    counted(gmm_step, "mixture_post", "fused C step", lambda r: r is not None)
    counted(gmm_step, "attention_step", "fused C step", lambda r: r is not None)
    counted(shared_source, "first_step_group", "first step per sentence", lambda g: g > 1)
    counted(incremental, "regroup", "keys regrouped", lambda r: r[1] > 1)
    fast = _beam(model, d, sample, True)
    taken = dict(shortcuts)
    reference = _beam(model, d, sample, False)
    assert len(fast) == len(reference) == 3
    for hyps, refs in zip(fast, reference):
        assert [h["tokens"].tolist() for h in hyps] == [r["tokens"].tolist() for r in refs]
        scores = torch.stack([h["score"] for h in hyps])
        torch.testing.assert_close(scores, torch.stack([r["score"] for r in refs]))
    # the steps took the shortcuts this test is about (and the reference did not)
    assert max(len(h[0]["tokens"]) for h in fast) > 3 + 1  # beyond the clip distance
    if arch.startswith("zhang2021_gmm") or arch == "zhang2021_synthesis_base":
        assert taken["source cached"] > 0
    elif extra:
        assert taken["step buckets"] > 0
    # the first step ran once per sentence; then every decoder layer's cross-attention kept
    # its keys once per sentence (GMM and the hard-coded Gaussian read positions only;
    # cross-attention Localness reads the keys, so it keeps a row per hypothesis) and, in the
    # plain model, kept the right rows when finished sentences left the batch (sentence 3
    # runs to the maximum length, the others end before)
    assert taken["first step per sentence"] == 1
    if arch == "zhang2021_localness_base":
        assert taken["keys regrouped"] == 0
    else:
        assert taken["keys regrouped"] >= 2
    if arch == "localnmt_base" and not extra:
        assert taken["keys regrouped"] > 2
    # the paper's variant decodes through the fused C step where it is built (kernel gmm_c_step)
    assert (taken["fused C step"] > 0) == (arch == "zhang2021_gmm_base" and gmm_step.ENABLED)
    # the reference took none of them but one: its first step is a one-token target, whose
    # relative buckets are a step's (one call per decoder layer)
    later = {label: shortcuts[label] - taken[label] for label in shortcuts}
    assert 0 <= later.pop("step buckets") <= (len(model.decoder.layers) if extra else 0)
    assert set(later.values()) == {0}


def _translation_archs() -> list[str]:
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.models.transformer import TransformerModel

    import localnmt.fairseq_plugin  # noqa: F401  (registers the architectures)

    return sorted(
        arch
        for arch, model in ARCH_MODEL_REGISTRY.items()
        if model.__module__.startswith("localnmt") and issubclass(model, TransformerModel)
    )


#: sizes every preset's layer and head ranges fit (6 layers, 8 heads; later flags win)
PRESET_SIZES = [
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
    "--encoder-layers", "6", "--decoder-layers", "6",
]  # fmt: skip


@pytest.mark.parametrize("arch", _translation_archs())
def test_every_architecture_decodes_with_incremental_state_as_without(arch):
    """Every translation architecture: beam search with incremental decoding (the first step
    once per sentence, cross-attention keys once per sentence where its modifiers allow)
    chooses the hypotheses of decoding without incremental state."""
    model, d = _build(arch, PRESET_SIZES)
    sample = _sample(d, [9, 6, 3], 9)
    fast, reference = _beam(model, d, sample, True), _beam(model, d, sample, False)
    for hyps, refs in zip(fast, reference):
        assert [h["tokens"].tolist() for h in hyps] == [r["tokens"].tolist() for r in refs]
        torch.testing.assert_close(
            torch.stack([h["score"] for h in hyps]), torch.stack([r["score"] for r in refs])
        )
