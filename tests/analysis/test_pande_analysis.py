"""Pande et al. 2021 analyses: CoNLL-U mapping, eq. 8 bias metric, eq. 5–7 sensitivity."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from localnmt import testing
from localnmt.analysis import conllu, locality_bias, sensitivity
from localnmt.attention import LocalAttention
from localnmt.attention.context import AttentionSite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conllu"
CONLLU = FIXTURES / "sample.conllu"
BPE = FIXTURES / "sample.bpe"


def test_read_conllu_and_bpe_mapping():
    sents = conllu.read_conllu(CONLLU)
    assert [len(s.words) for s in sents] == [6, 6, 7]  # the 1-2 multi-word line is skipped
    assert sents[0].heads == [1, -1, 5, 5, 5, 1]
    assert (0, 1) in sents[0].arcs() and (1, 0) in sents[0].arcs()
    lines = conllu.read_bpe(BPE, 3)
    assert conllu.piece_spans(sents[1].words, lines[1]) == [[0], [1], [2], [3, 4], [5], [6]]


def test_relation_sets_all_pieces_rule():
    sents = conllu.read_conllu(CONLLU)
    spans = conllu.piece_spans(sents[1].words, conllu.read_bpe(BPE, 3)[1])
    sets = conllu.relation_sets(sents[1], spans, length=8)  # 7 pieces + </s>
    # s10 (pieces 3, 4) -- s11 (piece 5) is an arc: local. s9 (2) -- s11 (5) is obl: syntactic.
    # s12 (6) -> s9 (2): punct, distance 4: syntactic. s7 (0) -> s9 (2): local.
    expected_s = {(2, 5), (5, 2), (2, 6), (6, 2)}
    got = {(i, j) for i in range(8) for j in range(8) if sets.syntactic[i, j]}
    assert got == expected_s
    for i in range(8):
        for j in range(8):
            assert bool(sets.local[i, j]) == (abs(i - j) <= 2)
            assert bool(sets.unrelated[i, j]) == (abs(i - j) > 2 and (i, j) not in expected_s)
    assert sets.queries.tolist() == [True] * 7 + [False]


def test_bias_score_is_eq8():
    torch.manual_seed(0)
    alpha = torch.softmax(torch.randn(3, 6, 6), -1)
    subset = torch.rand(6, 6) > 0.6
    queries = torch.tensor([True] * 5 + [False])
    got = locality_bias.bias_score(alpha, subset, queries)
    for h in range(3):
        terms = []
        for i in range(6):
            members = [j for j in range(6) if subset[i, j]]
            if not queries[i] or not members:
                continue
            num = sum(alpha[h, i, j] for j in members) / len(members)
            den = sum(alpha[h, i, j] for j in range(6)) / 6
            terms.append(num / den)
        torch.testing.assert_close(got[h], torch.stack(terms).mean())


def test_jacobian_norms_match_per_pair_gradients():
    torch.manual_seed(0)
    e, t = 8, 5
    attn = LocalAttention(e, 2, site=AttentionSite("encoder_self", 0, 1, e, 2), self_attention=True)
    x = torch.randn(t, 1, e)
    beta = sensitivity.jacobian_norms(attn, x)
    for i in range(t):
        rows = []
        for c in range(e):
            xi = x.clone().requires_grad_(True)
            attn(xi, xi, xi, need_weights=False)[0][i, 0, c].backward()
            rows.append(xi.grad[:, 0])  # ∂Y[i, c] / ∂X[j, :] for every j
        grad = torch.stack(rows, 1)  # (T, C_out, C_in)
        torch.testing.assert_close(beta[i], grad.pow(2).sum((1, 2)).sqrt(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "spec,heads",
    [
        ("", 2),  # plain attention: fused SDPA in the reference
        ("local_heads[masks=band1;global]", 2),  # Pande's local heads (post stage)
        ("csan_2d[window=3]", 4),  # a transform (stacked neighbouring heads) and a band
    ],
)
@pytest.mark.parametrize("memory_mb", [512, 0])  # 0: one vector–Jacobian product a chunk
def test_chunked_jacobian_norms_equal_the_reference(spec, heads, memory_mb):
    """The chunked vmap implementation gives the first (whole-Jacobian) one's numbers."""
    from localnmt.attention.spec import build_modifiers, parse_spec

    torch.manual_seed(1)
    e, t = 8, 7
    site = AttentionSite("encoder_self", 0, 1, e, heads)
    mods = build_modifiers(parse_spec(spec), site) if spec else None
    attn = LocalAttention(e, heads, site=site, modifiers=mods, self_attention=True).eval()
    x = torch.randn(t, 1, e)
    want = sensitivity.jacobian_norms(attn, x, method="reference")
    got = sensitivity.jacobian_norms(attn, x, method="chunked", memory_mb=memory_mb)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert got.shape == (t, t) and (got > 0).any()


def test_gammas_eq5_to_7():
    beta = torch.arange(36.0).view(6, 6)
    sets = conllu.RelationSets(
        local=torch.eye(6, dtype=torch.bool),
        syntactic=torch.zeros(6, 6, dtype=torch.bool),
        unrelated=~torch.eye(6, dtype=torch.bool),
        queries=torch.ones(6, dtype=torch.bool),
    )
    g = sensitivity.gammas(beta, sets)
    assert g["local"] == float(torch.diagonal(beta).mean())
    assert g["unrelated"] == float(((beta.sum(1) - torch.diagonal(beta)) / 5).mean())
    assert g["syntactic"] != g["syntactic"]  # NaN: no query has a syntactic set


def test_commands_on_a_tiny_trained_model(tiny_data, tmp_path, capsys):
    result = testing.train(
        tiny_data, tmp_path / "ckpt", "pande2021_2lochead_all6", max_update=3,
        extra=["--encoder-layers", "2", "--decoder-layers", "1", "--encoder-attention-heads", "8"],
    )  # fmt: skip
    common = ["--path", str(result.checkpoint), "--data", str(tiny_data), "--conllu", str(CONLLU)]
    out = tmp_path / "out"
    assert locality_bias.main([*common, "--bpe", str(BPE), "--out", str(out)]) == 0
    table = (out / "locality_bias.tsv").read_text().splitlines()
    assert len(table) == 1 + 2 * 8
    local = [float(line.split("\t")[2]) for line in table[1:]]
    assert all(v > 0 for v in local)
    # band1/band2 heads put all their attention in L_i: eq. 8 reaches its maximum T/|L_i|
    best = []
    for line in conllu.read_bpe(BPE, 3):
        n = len(line.split()) + 1  # pieces + </s>
        best.append(
            sum(n / len(range(max(0, i - 2), min(n, i + 3))) for i in range(n - 1)) / (n - 1)
        )
    for value in local[:2] + local[8:10]:
        assert abs(value - sum(best) / 3) < 1e-3
    assert all(v < sum(best) / 3 for v in local[2:8])  # global heads spread attention
    capsys.readouterr()
    assert sensitivity.main([*common, "--out", str(out)]) == 0
    rows = (out / "sensitivity.tsv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 2  # every sentence of the file by default, 2 layers
    words = [len(s.words) for s in conllu.read_conllu(str(CONLLU))]
    printed = capsys.readouterr().out
    # no BPE file here: one piece per word, the end-of-sentence token not counted
    assert f"used 3 of 3 sentences of {CONLLU} ({sum(words)} words, {sum(words)} subword" in printed
    for name in ("locality_bias_fig2.png", "locality_bias_fig3.png", "sensitivity.png"):
        assert (out / name).stat().st_size > 1000
