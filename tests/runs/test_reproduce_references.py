"""reproduce scores against the real raw references (``<data-bin>/../raw/<subset>.<tgt>``),
stops before training when they are missing, and stops with the valid choices on an unknown
paper or table. A rerun with the same settings reuses the trained run and its scores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from localnmt.runs import reproduce
from localnmt.runs.reproduce.plan import references

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval"
sys.path.insert(0, str(FIXTURES))

from tinydata import build_data_bin  # noqa: E402

CATALOG = FIXTURES / "catalog.json"


def _main(*argv: str) -> None:
    reproduce.main([*argv, "--catalog-json", str(CATALOG), "--cpu"])


def test_unknown_paper_or_table_lists_choices(capsys) -> None:
    with pytest.raises(SystemExit) as err:
        _main("nosuch2020", "Table 1", "--dry-run")
    assert err.value.code == 2
    err_text = capsys.readouterr().err
    assert "reproduce: error: unknown paper 'nosuch2020'; papers: vaswani2017" in err_text
    with pytest.raises(SystemExit) as err:
        _main("vaswani2017", "Table 9", "--dry-run")
    assert err.value.code == 2
    assert "vaswani2017 has no 'Table 9' (table9); its tables and figures: 'Table 1'" in (
        capsys.readouterr().err
    )


def test_reproduce_sh_unknown_paper_exit_2(tmp_path) -> None:
    cmd = ["bash", str(FIXTURES.parents[2] / "scripts" / "reproduce.sh"), "nosuch", "Table 1",
           "--catalog-json", str(CATALOG), "--dry-run", "--cpu"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 2 and "unknown paper 'nosuch'" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def two_test_sets(tmp_path_factory) -> Path:
    """A data-bin with subsets test and test1 and raw text of test only."""
    return build_data_bin(tmp_path_factory.mktemp("layout") / "data", test_copies=1)


def test_missing_raw_reference_stops_before_training(two_test_sets, tmp_path, capsys) -> None:
    work = tmp_path / "work"
    argv = ["vaswani2017", "Table 1", "--tiny", "--data", str(two_test_sets), "--subset",
            "test1", "--workdir", str(work), "--results-dir", str(tmp_path / "res")]  # fmt: skip
    with pytest.raises(SystemExit) as err:
        _main(*argv)
    assert err.value.code == 2
    missing = two_test_sets.parent / "raw" / "test1.de"
    err_text = capsys.readouterr().err
    assert f"reproduce: error: no raw references {missing} for subset test1" in err_text
    assert not work.exists()
    args = reproduce.parse_args([*argv, "--score-against-targets"])
    refs = references(two_test_sets, "test1", args)  # the explicit choice: logged and noted
    assert refs.ref is None and refs.src is None  # raw/test1.en is missing too
    assert "--score-against-targets" in refs.notes[0] and "test1.en missing" in refs.notes[1]
    assert "note: references: fairseq's post-processed targets" in capsys.readouterr().out


def test_scores_against_raw_test1_and_reuses_identical_run(two_test_sets, tmp_path) -> None:
    raw = two_test_sets.parent / "raw"
    # references that differ from fairseq's targets: the last word of each line dropped
    refs = [" ".join(x.split()[:-1]) for x in (raw / "test.de").read_text().splitlines()]
    (raw / "test1.de").write_text("\n".join(refs) + "\n")
    (raw / "test1.en").write_text((raw / "test.en").read_text())
    catalog = tmp_path / "one.json"
    catalog.write_text(json.dumps(json.loads(CATALOG.read_text())[:1]))
    cmd = [sys.executable, "-m", "localnmt.runs.reproduce", "vaswani2017", "Table 1", "--tiny",
           "--data", str(two_test_sets), "--subset", "test1", "--catalog-json", str(catalog),
           "--workdir", str(tmp_path / "work"), "--results-dir", str(tmp_path / "res"),
           "--layers", "1", "--max-update", "6", "--average", "1", "--cpu"]  # fmt: skip
    first = subprocess.run(cmd, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    results = json.loads((tmp_path / "res" / "vaswani2017_table1.json").read_text())
    scores = next(iter(results["scores"].values()))
    assert scores["references"] == str(raw / "test1.de")
    run = tmp_path / "work" / "vaswani2017_table1" / "fixture_base"
    hyp = (run / "eval" / "hyp.txt").read_text().splitlines()
    assert scores["sacrebleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(hyp, [refs]).score)
    assert (run / "eval" / "ref.txt").read_text().splitlines() == refs
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[skip] train: already done" in again.stdout
    assert "[skip] evaluate: already done" in again.stdout
