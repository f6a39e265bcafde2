"""Model level: flags and their errors, padding sides, incremental decoding, numerics, and
fairseq checkpoints loading into our base architecture."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.models import ARCH_MODEL_REGISTRY

from localnmt import testing
from localnmt.paths import PACKAGE_DIR, PLUGIN_DIR
from localnmt.safe_load import allow_checkpoint_globals

VOCAB = 40


def _dictionary() -> Dictionary:
    d = Dictionary()
    for i in range(VOCAB - len(d)):
        d.add_symbol(f"w{i}")
    return d


def build(arch: str = "localnmt_tiny", extra: list[str] | None = None):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser, ["/nonexistent", "--arch", arch, "--share-all-embeddings", *(extra or [])]
    )
    d = _dictionary()
    task = SimpleNamespace(source_dictionary=d, target_dictionary=d)
    torch.manual_seed(0)
    return ARCH_MODEL_REGISTRY[arch].build_model(args, task).eval()


def batch(side: str, lengths=(9, 5, 3)):
    """Source tokens padded on ``side``; same real tokens whatever the side."""
    d = _dictionary()
    g = torch.Generator().manual_seed(3)
    T = max(lengths)
    src = torch.full((len(lengths), T), d.pad())
    for i, n in enumerate(lengths):
        toks = torch.randint(d.nspecial, VOCAB, (n - 1,), generator=g)
        toks = torch.cat([toks, torch.tensor([d.eos()])])
        if side == "left":
            src[i, T - n :] = toks
        else:
            src[i, :n] = toks
    prev = torch.randint(d.nspecial, VOCAB, (len(lengths), 6), generator=g)
    prev[:, 0] = d.eos()
    return src, torch.tensor(lengths), prev


def _first_pad_left(model):
    model.encoder.embed_positions.left_pad = True


# ---- flags ---------------------------------------------------------------------------------


def _run_parse(argv):
    cmd = [sys.executable, "-c", "import sys; from fairseq import options; "
           "import localnmt; p = options.get_training_parser(); "
           "options.parse_args_and_arch(p, sys.argv[1:])", *argv]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True)


def test_unknown_method_is_an_argparse_error_naming_choices():
    res = _run_parse(
        ["/x", "--arch", "localnmt_base", "--encoder-attn-modifiers", "nope[layers=1]"]
    )
    assert res.returncode == 2
    assert "unknown attention method 'nope'" in res.stderr
    assert "valid:" in res.stderr


def test_unknown_arch_is_an_argparse_error():
    res = _run_parse(["/x", "--user-dir", str(PLUGIN_DIR), "--arch", "localnmt_nope"])
    assert res.returncode == 2
    assert "invalid choice" in res.stderr and "localnmt_base" in res.stderr


def test_bad_range_syntax_is_rejected_at_parse_time():
    from localnmt.attention.spec import SpecError, parse_ranges, parse_spec

    assert parse_ranges("1-3;5", "layers") == [0, 1, 2, 4]
    assert parse_ranges("all", "layers") is None
    with pytest.raises(SpecError, match="layers count from 1"):
        parse_ranges("0-2", "layers")
    with pytest.raises(SpecError, match="bad heads range"):
        parse_ranges("x", "heads")
    with pytest.raises(SpecError, match="expected method"):
        parse_spec("a b c")
    with pytest.raises(SpecError, match="needs key=value"):
        parse_spec(_any_method() + "[layers]")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--encoder-layers", "2", "--encoder-attn-modifiers", "M[layers=1-3]"], "valid: 1-2"),
        (["--decoder-attention-heads", "4", "--cross-attn-modifiers", "M[heads=5]"], "valid: 1-4"),
        (["--encoder-embed-dim", "30", "--encoder-attention-heads", "4"], "not divisible"),
    ],
)
def test_out_of_range_specs_stop_before_training(extra, message, capsys):
    extra = [e.replace("M", _any_method()) for e in extra]
    with pytest.raises(SystemExit) as exc:
        build("localnmt_tiny", extra)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def _any_method() -> str:
    from localnmt.attention.modifier import modifier_names

    names = modifier_names()
    assert names, "no attention method registered"
    return names[0]


# ---- padding side, incremental decoding, numerics ------------------------------------------


def test_encoder_output_does_not_depend_on_padding_side():
    model = build()
    outs = {}
    for side in ("left", "right"):
        src, lengths, _ = batch(side)
        enc = model.encoder(src, src_lengths=lengths)
        outs[side] = enc["encoder_out"][0].transpose(0, 1)  # (B, T, C)
    for i, n in enumerate((9, 5, 3)):
        T = outs["left"].size(1)
        torch.testing.assert_close(
            outs["left"][i, T - n :], outs["right"][i, :n], atol=1e-5, rtol=0
        )


def test_incremental_decoding_equals_full_forward():
    model = build()
    src, lengths, prev = batch("left")
    enc = model.encoder(src, src_lengths=lengths)
    full, _ = model.decoder(prev, encoder_out=enc)
    state: dict = {}
    for t in range(prev.size(1)):
        step, _ = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
        torch.testing.assert_close(step[:, -1], full[:, t], atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_low_precision_forward_backward_no_nan(dtype):
    model = build().train()
    src, lengths, prev = batch("left")
    with torch.autocast("cpu", dtype=dtype):
        out, _ = model(src, lengths, prev)
    assert torch.isfinite(out.float()).all()
    out.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


# ---- fairseq checkpoints ---------------------------------------------------------------------


def test_fairseq_transformer_checkpoint_translates_identically(tiny_data, tmp_path):
    """A checkpoint of fairseq's own ``transformer`` arch, converted to ``localnmt_base``,
    gives the same beam-search output (the parameters load unchanged)."""
    from localnmt.convert_checkpoint import convert

    result = testing.train(tiny_data, tmp_path / "fairseq", "transformer", max_update=8)
    ours = tmp_path / "ours.pt"
    convert(result.checkpoint, ours, "localnmt_base")
    theirs = testing.generate(tiny_data, result.checkpoint)
    mine = testing.generate(tiny_data, ours)
    assert mine.hypotheses == theirs.hypotheses
    assert len(mine.hypotheses) == len(mine.references) > 0
    state = torch.load(ours, weights_only=False)
    assert state["cfg"]["model"].arch == "localnmt_base"


def test_converting_to_a_method_adds_its_parameters_and_fine_tunes(tiny_data, tmp_path):
    """``--set encoder_attn_modifiers=...`` on a baseline checkpoint: the methods' parameters
    are added at a fresh model's initialisation (the same seed draws the same ones), every
    other tensor is unchanged, the result translates and fine-tunes with
    ``--finetune-from-model``, and it records where it came from."""
    from localnmt.convert_checkpoint import CONVERSION_KEY, convert

    spec = "localness[layers=1-2]"
    base = testing.train(tiny_data, tmp_path / "base", "transformer", max_update=6)
    out = tmp_path / "localness.pt"
    added = convert(base.checkpoint, out, "localnmt_base", {"encoder_attn_modifiers": spec})
    assert added and all(".self_attn.modifiers.0." in k for k in added)
    before = torch.load(base.checkpoint, weights_only=False)
    state = torch.load(out, weights_only=False)
    assert set(state["model"]) == set(before["model"]) | set(added)
    for key, value in before["model"].items():
        assert torch.equal(state["model"][key], value), key
    record = state[CONVERSION_KEY]
    assert record["initialised"] == added and record["seed"] == 1
    assert record["set"] == {"encoder_attn_modifiers": spec}
    assert len(record["source_sha256"]) == 64
    again = tmp_path / "again.pt"
    convert(base.checkpoint, again, "localnmt_base", {"encoder_attn_modifiers": spec})
    other = torch.load(again, weights_only=False)["model"]
    assert all(torch.equal(other[k], state["model"][k]) for k in added)
    weights = {k: state["model"][k] for k in added if k.endswith("w_p.weight")}
    assert weights and all(w.abs().sum() > 0 for w in weights.values())  # drawn, not zeros

    assert len(testing.generate(tiny_data, out).hypotheses) > 0
    tuned = testing.train(tiny_data, tmp_path / "tuned", "localnmt_base", max_update=4,
                          extra=["--encoder-attn-modifiers", spec,
                                 "--finetune-from-model", str(out)])  # fmt: skip
    assert len(tuned.losses) == 4
    tuned_state = torch.load(tuned.checkpoint, weights_only=False)
    assert set(tuned_state["model"]) == set(state["model"])
    # translating the converted file itself says its methods were never trained; the
    # fine-tuned checkpoint (fairseq writes no conversion record) says nothing
    from localnmt import provenance

    notes: list[str] = []
    provenance.check_trained(out, state, note=notes.append)
    provenance.check_trained(tuned.checkpoint, tuned_state, note=notes.append)
    provenance.check_trained(base.checkpoint, before, note=notes.append)
    assert len(notes) == 1 and f"{len(added)} method parameters" in notes[0]
    assert "never trained" in notes[0] and str(out) in notes[0]


def test_converting_to_a_method_that_replaces_projections_is_one_error(tiny_data, tmp_path):
    from localnmt import convert_checkpoint

    base = testing.train(tiny_data, tmp_path / "base", "transformer", max_update=2)
    argv = [str(base.checkpoint), str(tmp_path / "out.pt"), "--arch", "localnmt_base",
            "--set", "encoder_attn_modifiers=tied_qk[groups=2]"]  # fmt: skip
    assert testing.exit_status(convert_checkpoint.main, argv) == 2
    assert not (tmp_path / "out.pt").exists()


def test_checkpoint_round_trip_keeps_parameters(tiny_data, tmp_path):
    from fairseq import checkpoint_utils

    result = testing.train(tiny_data, tmp_path / "ck", "localnmt_tiny", max_update=4)
    models, cfg, _ = checkpoint_utils.load_model_ensemble_and_task([str(result.checkpoint)])
    # weights-only where torch can allow-list argparse.Namespace (2.4+; older needs none)
    weights_only = allow_checkpoint_globals()
    saved = torch.load(result.checkpoint, weights_only=weights_only)["model"]
    loaded = models[0].state_dict()
    assert set(saved) == set(loaded)
    for key, value in saved.items():
        torch.testing.assert_close(loaded[key], value, atol=0, rtol=0)


def test_fairseq_interactive_translates_with_the_plugin(tiny_data, tmp_path):
    """``fairseq-interactive --user-dir`` loads a localnmt checkpoint and beam-searches stdin;
    the ``--user-dir`` here is the package folder that command lines named before the plugin
    had its own subpackage, which must keep working."""
    result = testing.train(tiny_data, tmp_path / "ck", "localnmt_tiny", max_update=4)
    cmd = [
        sys.executable, "-m", "fairseq_cli.interactive", str(tiny_data),
        "--user-dir", str(PACKAGE_DIR), "--path", str(result.checkpoint),
        "--source-lang", "src", "--target-lang", "tgt", "--beam", "2", "--cpu",
        "--max-len-b", "8",
    ]  # fmt: skip
    res = subprocess.run(cmd, input="s1 s2 s3\ns4 s5\n", capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    hyps = [line for line in res.stdout.splitlines() if line.startswith("H-")]
    assert len(hyps) == 2
