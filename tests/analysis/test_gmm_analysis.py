"""The Zhang & Feng 2021 analysis commands on a tiny trained GMM model."""

from __future__ import annotations

import math

import pytest
import torch

from localnmt.analysis import alignment, gmm_entropy, gmm_gate, gmm_ngram, gmm_sigma
from localnmt.analysis.gmm_entropy import entropy
from localnmt.analysis.gmm_record import SentenceRecord
from localnmt.attention.methods.gmm import GaussianMixtureRecord
from localnmt.attention.record import AttentionRecord

SMALL = [
    "--encoder-embed-dim", "64", "--decoder-embed-dim", "64",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--decoder-layers", "3",
]  # fmt: skip


@pytest.fixture(scope="module")
def gmm_checkpoint(tiny_data, tmp_path_factory):
    from localnmt import testing

    out = tmp_path_factory.mktemp("gmm_model")
    return testing.train(tiny_data, out, "zhang2021_gmm_base", SMALL, max_update=12).checkpoint


def test_entropy_of_known_distributions():
    uniform = torch.full((1, 8), 0.125)
    assert entropy(uniform).item() == pytest.approx(math.log(8), abs=1e-5)
    assert entropy(torch.tensor([[0.0, 1.0, 0.0]])).item() == pytest.approx(0.0, abs=1e-6)
    assert entropy(torch.tensor([[1.0, 1.0]])).item() == pytest.approx(math.log(2), abs=1e-5)


def test_gate_and_entropy_commands(gmm_checkpoint, tiny_data, tmp_path, capsys):
    common = ["--path", str(gmm_checkpoint), "--data", str(tiny_data), "--subset", "test"]
    assert gmm_gate.main([*common, "--out", str(tmp_path / "gate")]) == 0
    table = (tmp_path / "gate.md").read_text()
    assert all(f"| L{layer} |" in table for layer in (1, 2, 3))
    assert (tmp_path / "gate.png").stat().st_size > 0

    assert gmm_entropy.main([*common, "--out", str(tmp_path / "entropy")]) == 0
    rows = (tmp_path / "entropy.md").read_text().splitlines()
    assert rows[0].startswith("|  | All | (0,20]")
    for kind in ("GMA", "DP", "Total"):
        row = next(r for r in rows if r.startswith(f"| {kind} |"))
        overall = float(row.split("|")[2])
        assert 0.0 <= overall <= math.log(16)  # tiny sentences: at most 15 tokens + EOS
    assert (tmp_path / "entropy.png").stat().st_size > 0

    for name, extra in (("sigma", []), ("sigma_init", ["--init-seed", "3"])):
        assert gmm_sigma.main([*common, *extra, "--out", str(tmp_path / name)]) == 0
        rows = (tmp_path / f"{name}.md").read_text().splitlines()
        assert rows[0].startswith("| σ = 0.5 (approx) | components | floored %")
        assert [r.split("|")[1].strip() for r in rows[2:6]] == ["all", "L1", "L2", "L3"]
        for row in rows[2:]:
            floored, start, end, narrow, weight = (float(x) for x in row.split("|")[3:8])
            assert 0.0 <= floored <= 100.0 and 0.0 <= weight <= 100.0
            assert start + end + narrow == pytest.approx(floored, abs=1e-3)
    assert (tmp_path / "sigma.md").read_text() != (tmp_path / "sigma_init.md").read_text()


def test_sigma_floor_counts_components_exactly():
    """J = 10 (9 tokens + EOS), one head, two target tokens, K = 3, floor 0.5."""
    mu = torch.tensor([[1.0, 5.0, 9.0], [4.0, 5.0, 6.0]])
    sigma = torch.tensor([[0.5, 0.5, 0.5], [1.0, 0.5, 2.0]])
    omega = torch.tensor([[0.2, 0.3, 0.5], [0.25, 0.25, 0.5]])
    probs = torch.full((1, 2, 10), 0.1)
    gmm = GaussianMixtureRecord(
        alpha=probs, beta=probs, gate=torch.zeros(1, 2), mu=mu[None], sigma=sigma[None],
        omega=omega[None],
    )  # fmt: skip
    with_gmm = AttentionRecord(probs=probs)
    with_gmm.add(gmm)
    rec = SentenceRecord(
        0, torch.arange(10), torch.arange(3), {0: AttentionRecord(probs), 1: with_gmm}
    )
    table = gmm_sigma.floor_counts([rec], sigma_min=0.5)
    assert set(table.layers) == {2}  # layer 1 has no gmm
    count = table.layers[2]
    assert (count.components, count.floored, count.at_start, count.at_end) == (6, 4, 1, 1)
    assert count.weight == pytest.approx(1.25) and count.total_weight == pytest.approx(2.0)
    assert table.buckets["(0,10]"].floored == 4 and table.buckets["[21,∞)"].components == 0
    row = count.row("L2")
    assert row[2:] == pytest.approx([400 / 6, 100 / 6, 100 / 6, 200 / 6, 62.5])


def test_alignment_command_on_known_alignment(gmm_checkpoint, tiny_data, tmp_path):
    """The tiny task swaps target words in pairs: gold links are i-(i±1)."""
    raw = tiny_data.parent / "raw"
    gold_lines = []
    for line in (raw / "test.src").read_text().splitlines():
        n = len(line.split())
        links = []
        for t in range(n):
            s = t + 1 if t % 2 == 0 and t + 1 < n else t - 1 if t % 2 else t
            links.append(f"{s}-{t}")
        gold_lines.append(" ".join(links))
    gold = tmp_path / "gold.txt"
    gold.write_text("\n".join(gold_lines) + "\n")
    argv = ["--path", str(gmm_checkpoint), "--data", str(tiny_data),
            "--source", str(raw / "test.src"), "--target", str(raw / "test.tgt"),
            "--gold", str(gold), "--out", str(tmp_path / "align")]  # fmt: skip
    assert alignment.main(argv) == 0
    row = (tmp_path / "align.md").read_text().splitlines()[2].split("|")
    aer, precision, recall = (float(x) for x in row[1:4])
    assert 0.0 <= aer <= 100.0 and 0.0 <= precision <= 100.0 and 0.0 <= recall <= 100.0
    assert (tmp_path / "align.png").stat().st_size > 0


def test_ngram_and_length_command(tmp_path):
    refs = ["a b c d", "e f g h i j k l m n o p", "x y"]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    (tmp_path / "base").write_text("a b x d\ne f g h i j k l m n o q\nx z\n")
    (tmp_path / "sys").write_text("a b c d\ne f g h i j k l m n o p\nx y\n")
    (tmp_path / "src").write_text("1 2 3\n" + " ".join(["w"] * 25) + "\n1\n")
    argv = ["--refs", str(tmp_path / "ref"), "--baseline", str(tmp_path / "base"),
            "--system", str(tmp_path / "sys"), "--sources", str(tmp_path / "src"),
            "--out", str(tmp_path / "ngram")]  # fmt: skip
    assert gmm_ngram.main(argv) == 0
    table = (tmp_path / "ngram.md").read_text()
    gap1 = float(table.splitlines()[2].split("|")[4])
    assert gap1 > 0  # the system is perfect, the baseline is not
    assert "BLEU (0,10] (2 sent.)" in table and "BLEU [21,30] (1 sent.)" in table
    assert (tmp_path / "ngram.png").stat().st_size > 0
