"""The plain PyTorch modules and the functional form (localnmt.attention.layers): padding
sides, decoding with a cache, state-dict round trips, projected heads = the module."""

from __future__ import annotations

import pytest
import torch

from localnmt.attention.layers import (
    LocalCrossAttention,
    LocalSelfAttention,
    local_attention,
    reorder_cache,
)
from localnmt.attention.modifier import SpecError

E, H = 16, 4
ENCODER = [
    "", "localness", "localness[window=query]", "localness[window=head]", "rel_pos[clip=3]",
    "csan_1d[window=3]", "csan_2d[window=3,area_heads=3]", "block[block=3]", "bi_direct",
    "neighbor", "local_hard", "local_heads[masks=prev1;next1;band2;global]",
    "local_heads_renorm[masks=prev1;next1;band2;global]", "tied_qk",
]  # fmt: skip
DECODER = ["", "csan_1d[window=3]", "localness", "rel_pos[clip=3]"]
CROSS = ["", "gmm[k=2]", "gmm[k=2,variant=norm]", "hardcoded_gaussian"]


def _self(spec: str, causal: bool = False, seed: int = 0) -> LocalSelfAttention:
    torch.manual_seed(seed)
    return LocalSelfAttention(E, H, spec, causal=causal).eval()


def _cross(spec: str, seed: int = 0) -> LocalCrossAttention:
    torch.manual_seed(seed)
    return LocalCrossAttention(E, H, spec).eval()


def _pad(lengths: list[int], total: int, side: str) -> torch.Tensor:
    mask = torch.ones(len(lengths), total, dtype=torch.bool)
    for row, n in enumerate(lengths):
        mask[row, :n] = False
    return mask if side == "right" else mask.flip(1)


def _place(real: torch.Tensor, lengths: list[int], total: int, side: str) -> torch.Tensor:
    """Sentences ``real[b, :n]`` right- or left-aligned in a zero batch of ``total`` steps."""
    out = torch.zeros(real.size(0), total, real.size(2))
    for row, n in enumerate(lengths):
        span = slice(0, n) if side == "right" else slice(total - n, total)
        out[row, span] = real[row, :n]
    return out


@pytest.mark.parametrize("spec", ENCODER)
def test_encoder_padding_side_does_not_change_real_tokens(spec: str) -> None:
    layer, lengths, total = _self(spec), [4, 7], 7
    real = torch.randn(2, total, E)
    outs = {}
    for side in ("left", "right"):
        y = layer(_place(real, lengths, total, side), _pad(lengths, total, side))
        outs[side] = [y[row, :n] if side == "right" else y[row, total - n :]
                      for row, n in enumerate(lengths)]  # fmt: skip
    for left, right in zip(outs["left"], outs["right"]):
        torch.testing.assert_close(left, right, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spec", CROSS)
def test_cross_memory_padding_side_does_not_change_outputs(spec: str) -> None:
    layer, lengths, total = _cross(spec), [5, 8], 8
    memory, x = torch.randn(2, total, E), torch.randn(2, 3, E)
    left = layer(x, _place(memory, lengths, total, "left"), _pad(lengths, total, "left"))
    right = layer(x, _place(memory, lengths, total, "right"), _pad(lengths, total, "right"))
    torch.testing.assert_close(left, right, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spec", DECODER)
def test_decoder_steps_with_a_cache_equal_the_full_pass(spec: str) -> None:
    layer, x = _self(spec, causal=True), torch.randn(3, 6, E)
    cache: dict = {}
    steps = torch.cat([layer(x[:, t : t + 1], cache=cache) for t in range(6)], dim=1)
    torch.testing.assert_close(steps, layer(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spec", CROSS)
def test_cross_steps_with_a_cache_equal_the_full_pass_and_follow_reordering(spec: str) -> None:
    layer, x, memory = _cross(spec), torch.randn(3, 5, E), torch.randn(3, 7, E)
    pad = _pad([7, 4, 6], 7, "left")
    cache: dict = {}
    steps = torch.cat([layer(x[:, t : t + 1], memory, pad, cache=cache) for t in range(5)], 1)
    torch.testing.assert_close(steps, layer(x, memory, pad), atol=1e-5, rtol=1e-5)
    # beam search: the hypotheses of one sentence (one source) swapped mid-way keep their
    # own decoder step and method state
    memory, pad = memory[:1].expand(3, -1, -1), pad[:1].expand(3, -1)
    order = torch.tensor([2, 0, 0])
    cache = {}
    first = torch.cat([layer(x[:, t : t + 1], memory, pad, cache=cache) for t in range(2)], 1)
    reorder_cache(layer, cache, order)
    rest = [layer(x[order, t : t + 1], memory[order], pad[order], cache=cache) for t in (2, 3, 4)]
    full = layer(x[order], memory[order], pad[order])
    torch.testing.assert_close(torch.cat([first[order], *rest], 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spec", ENCODER[1:] + [f"decoder:{s}" for s in DECODER[1:]])
def test_state_dict_round_trip(spec: str, tmp_path) -> None:
    causal = spec.startswith("decoder:")
    spec = spec.removeprefix("decoder:")
    trained, fresh = _self(spec, causal, seed=0), _self(spec, causal, seed=1)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.1 * torch.randn_like(p))
    torch.save(trained.state_dict(), tmp_path / "layer.pt")
    fresh.load_state_dict(torch.load(tmp_path / "layer.pt", weights_only=True))
    x = torch.randn(2, 5, E)
    torch.testing.assert_close(fresh(x), trained(x), atol=0, rtol=0)


@pytest.mark.parametrize("spec", ["", "localness[window=query]", "rel_pos[clip=3]", "block"])
def test_functional_form_on_projected_heads_equals_the_module(spec: str) -> None:
    layer = _self(spec)
    core = layer.attention
    x, pad = torch.randn(2, 6, E), _pad([6, 4], 6, "left")

    def heads(proj: torch.nn.Linear) -> torch.Tensor:
        return proj(x).view(2, 6, H, E // H).transpose(1, 2)

    out, _ = local_attention(core, heads(core.q_proj), heads(core.k_proj), heads(core.v_proj),
                             query_input=x, key_padding_mask=pad)  # fmt: skip
    merged = core.out_proj(out.transpose(1, 2).reshape(2, 6, E))
    torch.testing.assert_close(merged, layer(x, pad), atol=1e-6, rtol=1e-6)


def test_functional_form_asks_for_the_layer_input_where_a_method_reads_it() -> None:
    core = _self("block").attention
    q = torch.randn(1, H, 3, E // H)
    with pytest.raises(ValueError, match="block reads the layer input"):
        local_attention(core, q, q, q)


def test_padding_masks_must_be_bool_and_batch_by_length() -> None:
    """A 0/1 mask reads either way (transformers' attention_mask is 1 at real tokens, the
    opposite of these): only bool masks, True at padding, of the right shape are taken."""
    x, memory = torch.randn(2, 5, E), torch.randn(2, 7, E)
    pad = _pad([5, 3], 5, "right")
    hf_style = (~pad).long()
    with pytest.raises(ValueError, match=r"padding_mask must be a bool tensor.*got int64.*== 0"):
        _self("localness")(x, padding_mask=hf_style)
    with pytest.raises(ValueError, match="got float32"):
        _self("localness")(x, padding_mask=pad.float())
    with pytest.raises(ValueError, match=r"must be \(batch, length\) = \(2, 5\), got \(2, 7\)"):
        _self("localness")(x, padding_mask=_pad([7, 3], 7, "right"))
    with pytest.raises(ValueError, match="memory_padding_mask must be a bool tensor"):
        _cross("gmm[k=2]")(x, memory, memory_padding_mask=(~_pad([7, 4], 7, "right")).long())
    core = _self("localness").attention
    q = torch.randn(2, H, 5, E // H)
    with pytest.raises(ValueError, match="key_padding_mask must be a bool tensor"):
        local_attention(core, q, q, q, key_padding_mask=hf_style)
    torch.testing.assert_close(  # the bool mask itself: as before
        _self("localness")(x, padding_mask=pad)[1, :3],
        _self("localness")(x[:, :3], padding_mask=pad[:, :3])[1],
    )


def test_bad_specs_are_one_error_before_any_parameter() -> None:
    with pytest.raises(SpecError, match="unknown attention method 'nope'"):
        LocalSelfAttention(E, H, "nope")
    with pytest.raises(SpecError, match="layers=3"):
        LocalSelfAttention(E, H, "localness[layers=3]", num_layers=2)
    with pytest.raises(SpecError):
        LocalSelfAttention(E, H, "gmm")  # cross-attention only


def test_gradients_reach_every_method_parameter() -> None:
    layer = LocalSelfAttention(E, H, "localness[window=query] + rel_pos[clip=3] + block").train()
    layer(torch.randn(2, 5, E)).sum().backward()
    missing = [n for n, p in layer.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing
