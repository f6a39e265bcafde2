"""Zhang & Feng 2021 at model level: parameter deltas, decoder incremental = full forward,
training and beam search through fairseq with the catalog rows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from localnmt.catalog import all_rows
from localnmt.catalog.params import count_parameters

SMALL = [
    "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
]  # fmt: skip


def _gmm_delta(head_dim: int, k: int, layers: int) -> int:
    """Eq. 7-9 (d×d, d, d×K, K each) and eq. 14 (d×d, d, d, 1), once per decoder layer."""
    predictor = head_dim * head_dim + head_dim + head_dim * k + k
    gate = head_dim * head_dim + head_dim + head_dim + 1
    return layers * (3 * predictor + gate)


def test_parameter_delta_matches_paper():
    base, big = count_parameters("localnmt_base"), count_parameters("localnmt_big")
    ours = count_parameters("zhang2021_gmm_base")
    ours_big = count_parameters("zhang2021_gmm_big")
    assert ours - base == _gmm_delta(64, 4, 6) == 104_910
    assert ours_big - big == _gmm_delta(64, 4, 6)
    rows = {r.row: r for r in all_rows() if r.paper == "zhang2021" and r.table == "Table 2"}
    paper_delta = rows["Our Method"].paper_params - rows["Transformer-Base"].paper_params
    assert abs((ours - base) / 1e6 - paper_delta) < 0.05  # Table 2: +0.1M
    paper_big = rows["Our Method (Big)"].paper_params - rows["Transformer-Big"].paper_params
    assert abs((ours_big - big) / 1e6 - paper_big) < 0.05


def _build(arch: str, extra: list[str]):
    from fairseq import options
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_REGISTRY

    d = Dictionary()
    for i in range(20):
        d.add_symbol(f"w{i}")
    parser = options.get_training_parser()
    argv = ["/nonexistent", "--arch", arch, "--share-all-embeddings", "--dropout", "0",
            "--encoder-layers", "2", "--decoder-layers", "2", *SMALL, *extra]  # fmt: skip
    args = options.parse_args_and_arch(parser, argv)
    task = SimpleNamespace(source_dictionary=d, target_dictionary=d)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task).eval(), d


@pytest.mark.parametrize(
    "arch,extra",
    [
        ("zhang2021_gmm_base", []),
        ("zhang2021_gmm_norm_base", []),
        ("zhang2021_synthesis_base", []),
        ("zhang2021_hardcoded_base", []),
        ("zhang2021_gmm_base", ["--cross-attn-modifiers", "gmm[layers=2,k=2,fusion=average]"]),
    ],
)
def test_decoder_incremental_equals_full_forward(arch, extra):
    model, d = _build(arch, extra)
    torch.manual_seed(3)
    bsz, src_len, tgt_len = 3, 7, 6
    lengths = torch.tensor([7, 4, 2])
    src = torch.full((bsz, src_len), d.pad())
    for b, n in enumerate(lengths.tolist()):  # left padding, as fairseq's default
        src[b, src_len - n :] = torch.randint(d.nspecial, len(d), (n,))
        src[b, -1] = d.eos()
    prev = torch.randint(d.nspecial, len(d), (bsz, tgt_len))
    prev[:, 0] = d.eos()
    with torch.no_grad():
        enc = model.encoder(src, src_lengths=lengths)
        full, _ = model.decoder(prev, encoder_out=enc)
        state: dict = {}
        for t in range(tgt_len):
            step, _ = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
            torch.testing.assert_close(step[:, 0], full[:, t], atol=1e-4, rtol=1e-4)


def test_rows_train_and_beam_search(tiny_data, tmp_path):
    """Our Method and the Synthesis Network (stateful) through fairseq train → generate."""
    from localnmt import testing

    rows = {r.row: r for r in all_rows() if r.paper == "zhang2021"}
    for label in ("Our Method", "Synthesis Network"):
        row = rows[label]
        out = tmp_path / label.replace(" ", "_")
        result = testing.train(tiny_data, out, row.arch, [*row.args, *SMALL], max_update=12)
        assert result.losses and all(loss == loss for loss in result.losses)
        gen = testing.generate(tiny_data, result.checkpoint, beam=3)
        assert len(gen.hypotheses) == len(gen.references) > 0
