"""Train → reload → beam search → score with localness and rel_pos at every site, at the size of
the shared catalog test (64-dim embeddings/FFN, the arch's layer and head counts), then the
window analysis (Figures 2 and 3) on the trained checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pytest

from localnmt import testing

SMALL = ["--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
         "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory):
    """yang2018_localness_base (6+6 layers, 8 heads of dim 8) with localness and rel_pos
    everywhere: encoder layers 1-3 (arch) + rel_pos, decoder self, cross (head-specific)."""
    extra = [
        *SMALL,
        "--encoder-layers", "6", "--decoder-layers", "6",
        "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
        "--encoder-attn-modifiers", "localness[layers=1-3] + rel_pos[layers=4-6,clip=4]",
        "--decoder-attn-modifiers", "localness[layers=1-2,window=layer] + rel_pos",
        "--cross-attn-modifiers", "localness[layers=1,window=head]",
    ]  # fmt: skip
    save = tmp_path_factory.mktemp("yang2018")
    result = testing.train(tiny_data, save, "yang2018_localness_base", extra, max_update=12)
    return tiny_data, result


def test_train_generate(trained):
    data, result = trained
    assert result.losses and all(np.isfinite(result.losses))
    out = testing.generate(data, result.checkpoint, beam=3)
    assert len(out.hypotheses) == len(out.references) > 0
    assert np.isfinite(out.bleu)


def test_window_analysis(trained, tmp_path):
    data, result = trained
    from localnmt.analysis import localness_windows

    argv = ["--data", str(data), "--path", str(result.checkpoint), "--subset", "valid",
            "--out", str(tmp_path)]  # fmt: skip
    assert localness_windows.main(argv) == 0
    npz = np.load(tmp_path / "windows.npz")
    for layer in (1, 2, 3):
        p, d = npz[f"encoder_self.layer{layer}.P"], npz[f"encoder_self.layer{layer}.D"]
        length = npz[f"encoder_self.layer{layer}.length"]
        assert p.shape == d.shape and p.shape[1] == 8
        assert (p >= 0).all() and (p <= length[:, None] - 1 + 1e-4).all()
        assert (d >= 0.1 - 1e-6).all() and (d <= length[:, None] + 1e-4).all()
    assert "encoder_self.layer4.P" not in npz
    cross = npz["cross.layer1.D"]
    assert np.allclose(cross, cross[:1])  # head-specific: one window per head
    assert "decoder_self.layer2.D" in npz
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["encoder_self.layer1"]["tokens"] == p.shape[0]
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert (tmp_path / f"figure2_{kind}.png").stat().st_size > 0
        assert (tmp_path / f"figure3_{kind}.png").stat().st_size > 0
    jsonl = tmp_path / "jsonl"
    assert localness_windows.main([*argv[:-1], str(jsonl), "--format", "jsonl",
                                   "--max-batches", "1"]) == 0  # fmt: skip
    first = json.loads((jsonl / "windows.jsonl").read_text().splitlines()[0])
    assert {"site", "layer", "sentence", "position", "length", "P", "D"} <= set(first)
    assert len(first["P"]) == 8
