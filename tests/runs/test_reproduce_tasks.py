"""reproduce.sh per task: selection, missing data, dry-run commands of every task, and the NIST
(4 references) and GLUE paths end to end on tiny data."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from localnmt.catalog import all_rows
from localnmt.errors import UsageError
from localnmt.runs import reproduce

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval"
sys.path.insert(0, str(FIXTURES))

import tinytasks  # noqa: E402


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Path:
    """The real catalog as JSON, without parameter counts (fast)."""
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps([r.to_json() for r in all_rows()]))
    return path


def _run(capsys, *argv: str) -> str:
    reproduce.reproduce(reproduce.parse_args([*argv, "--cpu"]))
    return capsys.readouterr().out


def _commands(out: str) -> list[str]:
    """Printed commands: localnmt-train lines, GLUE's Python entry points."""
    starts = ("localnmt-train ", shlex.quote(sys.executable) + " -m ")
    return [line for line in out.splitlines() if line.startswith(starts)]


def test_first_task_by_default_and_others_named(catalog, tmp_path, capsys):
    common = ["--catalog-json", str(catalog), "--data-root", str(tmp_path), "--dry-run"]
    out = _run(capsys, "yang2018", "Table 4", *common)
    assert "has rows of 2 tasks: wmt14_en_de (WMT14 En→De, 7 rows), wmt17_zh_en" in out
    assert "Running wmt14_en_de; choose with --task NAME, or --task all" in out
    assert len(_commands(out)) == 7 and "wmt17" not in "".join(_commands(out))
    both = _run(capsys, "yang2018", "Table 4", *common, "--task", "all")
    assert len(_commands(both)) == 14 and "has rows of" not in both
    assert f"# task: wmt17_zh_en (WMT17 Zh→En); data: {tmp_path}/wmt17_zh_en/data-bin" in both
    with pytest.raises(UsageError, match="has no rows of task 'glue'; its tasks: wmt14_en_de"):
        _run(capsys, "yang2018", "Table 4", *common, "--task", "glue")


def test_tiny_fallback_of_one_task_leaves_the_next_its_own_data(catalog, tmp_path):
    """--task all --tiny: WMT14 En-De has no data (gettext corpus), WMT17 Zh-En has its own."""
    from localnmt.runs.reproduce.plan import plan_task

    zh = tmp_path / "wmt17_zh_en" / "data-bin"
    zh.mkdir(parents=True)
    (zh / "dict.zh.txt").write_text("a 1\n")
    argv = ["yang2018", "Table 4", "--catalog-json", str(catalog), "--data-root", str(tmp_path)]
    args = reproduce.parse_args([*argv, "--task", "all", "--tiny"])
    rows = {r.task: r for r in all_rows() if r.paper == "yang2018" and r.table == "Table 4"}
    first = plan_task("wmt14_en_de", [rows["wmt14_en_de"]], args, check=False)
    second = plan_task("wmt17_zh_en", [rows["wmt17_zh_en"]], args, check=False)
    assert first.data is None and first.pair == "en-de"
    assert second.data == zh


def test_missing_data_stops_before_training(catalog, tmp_path, capsys):
    work = tmp_path / "work"
    common = ["--catalog-json", str(catalog), "--data-root", str(tmp_path / "data"),
              "--workdir", str(work), "--results-dir", str(tmp_path / "res")]  # fmt: skip
    with pytest.raises(UsageError) as err:
        _run(capsys, "zhang2021", "Table 2", "--task", "nist_zh_en", *common)
    message = str(err.value)
    assert message.startswith(f"no data for NIST Zh→En (nist_zh_en): {tmp_path}/data/nist_zh_en")
    assert f"data_prep/prepare_nist_zh_en.sh LDC_DIR NIST_DIR {tmp_path}/data/nist_zh_en" in message
    assert "Nothing was trained" in message
    # every task is checked first: WMT14 En-De data present, WMT17 Zh-En missing
    de = tmp_path / "data" / "wmt14_en_de" / "data-bin"
    de.mkdir(parents=True)
    (de / "dict.en.txt").write_text("a 1\n")
    with pytest.raises(UsageError, match="(?s)no data for WMT17 Zh→En .*prepare_wmt17_zh_en.sh"):
        _run(capsys, "yang2019", "Table 2", "--task", "all", *common)
    with pytest.raises(UsageError, match="(?s)no data for GLUE .*prepare_glue.sh"):
        _run(capsys, "pande2021", "Table 4", "--tiny", *common)  # no embedded GLUE corpus
    # NIST data without its references
    nist = tmp_path / "nist-bin"
    nist.mkdir()
    with pytest.raises(UsageError, match="(?s)no references .*subsets.json"):
        _run(capsys, "zhang2021", "Table 2", "--task", "nist_zh_en", "--data", str(nist), *common)
    assert not work.exists() and not (tmp_path / "res").exists()
    # the default data directory is found
    out = _run(capsys, "pande2021", "Table 1", "--dry-run", *common)
    assert f"data: {de}" in out and f"--data {de} " in _commands(out)[0]


def test_dry_run_en_ru_tokens_per_update(catalog, tmp_path, capsys):
    common = ["--catalog-json", str(catalog), "--data-root", str(tmp_path), "--dry-run"]
    ru = _commands(_run(capsys, "pande2021", "Table 2", "--task", "wmt14_en_ru", *common))
    assert len(ru) == 5 and all("--tokens-per-update 25000" in c for c in ru)
    de = _commands(_run(capsys, "pande2021", "Table 2", *common))
    assert len(de) == 5 and not any("--tokens-per-update" in c for c in de)
    # the printed localnmt-train line gives 25K-token updates: ceil(25000 / 4096) = 7 on one
    # device
    line = _launch(ru[0], capsys)
    assert "--update-freq 7" in line and "--max-tokens 4096" in line
    assert "--update-freq 8" in _launch(de[0], capsys)  # 32768 tokens


def _launch(line: str, capsys) -> str:
    """What the printed ``localnmt-train`` line launches (its dry run)."""
    from localnmt.runs import train

    argv = shlex.split(line)[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    train.main([*argv[:cut], "--dry-run", *argv[cut:]])
    return capsys.readouterr().out


def test_dry_run_per_task(catalog, tmp_path, capsys):
    common = ["--catalog-json", str(catalog), "--data-root", str(tmp_path), "--dry-run"]
    nist = _run(capsys, "zhang2021", "Table 2", "--task", "nist_zh_en", *common)
    assert len(_commands(nist)) == 8
    assert "# evaluate: decode test=mt03, test1=mt04, test2=mt05, test3=mt06, test4=mt08; " \
           "4-reference lower-cased BLEU" in nist  # fmt: skip
    ja = _run(capsys, "yang2019", "Table 2", "--task", "wat17_ja_en", *common)
    assert f"--data {tmp_path}/wat17_ja_en/data-bin " in _commands(ja)[0]
    assert "--arch yang2019_csan2d_big --size big" in ja
    dev = _run(capsys, "yang2018", "Table 1", *common)  # Zh⇒En development-set ablation
    assert "# task: wmt17_zh_en" in dev and "# evaluate: decode subset valid" in dev
    assert "separate Chinese/English vocabularies" in dev
    # a table and a figure with the same number are different selections
    t4 = _commands(_run(capsys, "zhang2021", "Table 4", *common))
    f4 = _commands(_run(capsys, "zhang2021", "Figure 4", *common))
    assert len(t4) == 3 and len(f4) == 8


def test_dry_run_glue(catalog, tmp_path, capsys):
    common = ["--catalog-json", str(catalog), "--data-root", str(tmp_path), "--dry-run"]
    out = _run(capsys, "pande2021", "Table 4", *common)
    cmds = _commands(out)
    assert len(cmds) == 6 * 5  # per row: pre-training, then QQP, SST-2, MNLI, QNLI
    pre, *fine = cmds[5:10]  # All Band2 Untied
    assert "-m localnmt.runs.roberta_pretrain" in pre
    assert "--arch pande2021_bert_band2_untied" in pre
    assert f"--data {tmp_path}/glue/pretrain " in pre
    ckpt = pre.split("--save-dir ")[1].split()[0] + "/seq512/checkpoint_last.pt"
    for cmd, task in zip(fine, ("QQP", "SST-2", "MNLI", "QNLI")):
        assert "-m localnmt.runs.glue_finetune" in cmd and f"--data {tmp_path}/glue/{task} " in cmd
        assert f"--restore-file {ckpt} " in cmd and "--batch-size 32 --lr 1e-4" in cmd
    assert "--valid-subset valid,valid1" in fine[2] and "--valid-subset" not in fine[0]
    from localnmt.runs.glue_runs import glue_step_key, plan_row

    row = next(r for r in all_rows() if r.arch == "pande2021_bert_band2_untied")
    steps = plan_row(row, tmp_path, tmp_path / "r", grid=True).steps
    keys = [glue_step_key(s, tmp_path / "r") for s in steps]
    assert len(set(keys)) == len(keys) == 17 and keys[:2] == ["pretrain", "QQP_bsz32_lr1e-4"]
    for step in steps:  # the folder set aside on a changed setting is the one fairseq writes
        assert step.cmd[step.cmd.index("--save-dir") + 1] == str(step.save_dir)
    grid = _commands(_run(capsys, "pande2021", "Table 4", *common, "--glue-grid"))
    assert len(grid) == 6 * (1 + 4 * 4)
    assert sum("--batch-size 128 --lr 2e-4" in c for c in grid) == 6 * 4


def test_separate_vocab_detected(tmp_path):
    data = tmp_path / "bin"
    data.mkdir()
    (data / "test.zh-en.zh.idx").write_bytes(b"")
    (data / "dict.zh.txt").write_text("中 1\n")
    (data / "dict.en.txt").write_text("a 1\n")
    assert reproduce.separate_vocab(data)
    (data / "dict.zh.txt").write_text("a 1\n")
    assert not reproduce.separate_vocab(data)


def _catalog(path: Path, task: str, table: str, rows: list[tuple[str, str, str, list]]) -> Path:
    path.write_text(json.dumps([
        {"name": n, "paper": "pande2021", "table": table, "row": label, "size": "base",
         "arch": arch, "args": args, "task": task, "params": None}
        for n, label, arch, args in rows
    ]))  # fmt: skip
    return path


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def test_nist_multi_reference_end_to_end(tmp_path):
    from localnmt.data import nist_zh_en

    ldc, nist = tinytasks.nist_dirs(tmp_path / "src")
    work = tmp_path / "data" / "nist_zh_en"  # the task's default directory
    prep = ["process", "--ldc-dir", str(ldc), "--nist-dir", str(nist), "--workdir", str(work),
            "--bpe-merges", "80", "--workers", "1"]  # fmt: skip
    assert nist_zh_en.main(prep) == 0
    catalog = _catalog(tmp_path / "c.json", "nist_zh_en", "Table 2", [
        ("n_base", "Transformer-Base", "transformer", []),
        ("n_pre", "+ pre-norm", "transformer", ["--encoder-normalize-before"]),
    ])  # fmt: skip
    cmd = [
        "bash",
        str(REPO / "scripts" / "reproduce.sh"),
        "pande2021",
        "Table 2",
        "--tiny",
        "--catalog-json",
        str(catalog),
        "--data-root",
        str(tmp_path / "data"),
        "--workdir",
        str(tmp_path / "work"),
        "--results-dir",
        str(tmp_path / "res"),
        "--layers",
        "1",
        "--max-update",
        "12",
        "--cpu",
        "--",
        "--required-batch-size-multiple",
        "1",
    ]  # fmt: skip (4-sentence valid set)
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    stem = "pande2021_table2_nist_zh_en"
    page = (tmp_path / "res" / f"{stem}.md").read_text()
    table = [line for line in page.splitlines() if line.startswith("| ")]
    assert table[0] == (
        "| Model | #Params | #Params (paper size) | Speed (steps/s) | Words/s "
        "| MT03 | MT04 | MT05 | MT06 | MT08 | BLEU (avg) | tok. BLEU | Δ | p |"
    )
    assert "4-reference" in page and "no test for the 4-reference average" in page
    results = json.loads((tmp_path / "res" / f"{stem}.json").read_text())
    assert results["task"] == "nist_zh_en"
    refs = work / "refs"
    run = tmp_path / "work" / stem
    averages = {}
    for name in ("n_base", "n_pre"):
        s = results["scores"][name]
        assert s["subsets"] == {"test": "mt03", "test1": "mt04", "test2": "mt05",
                                "test3": "mt06", "test4": "mt08"}  # fmt: skip
        for mt in ("mt03", "mt04", "mt05", "mt06", "mt08"):
            hyp = (run / name / "eval" / mt / "hyp.txt").read_text().splitlines()
            assert len(hyp) == 4
            streams = [(refs / f"{mt}.ref{r}").read_text().splitlines() for r in range(4)]
            expected = sacrebleu.corpus_bleu(hyp, streams, lowercase=True).score
            assert s["sets"][mt]["score"] == pytest.approx(expected)
        assert s["average"] == pytest.approx(sum(v["score"] for v in s["sets"].values()) / 5)
        assert "nrefs:4" in s["signature"] and "case:lc" in s["signature"]
        averages[name] = s["average"]
    base, pre = results["rows"]
    assert base["is_baseline"] and base["delta"] is None and base["bleu"] == averages["n_base"]
    assert pre["delta"] == pytest.approx(averages["n_pre"] - averages["n_base"])
    assert pre["p_value"] is None and set(pre["sets"]) == {"mt03", "mt04", "mt05", "mt06", "mt08"}
    # single-reference scores per set, with the bootstrap against the baseline's same set
    assert "bootstrap" in results["scores"]["n_pre"]["single_ref"]["mt05"]
    assert "bootstrap" not in results["scores"]["n_base"]["single_ref"]["mt05"]


def test_glue_tiny_end_to_end(tmp_path):
    data = tinytasks.glue_data(tmp_path / "glue")
    catalog = _catalog(tmp_path / "c.json", "glue", "Table 4", [
        ("g_tied", "All Band6 120Tied", "pande2021_bert_band6_120tied", []),
    ])  # fmt: skip
    cmd = ["bash", str(REPO / "scripts" / "reproduce.sh"), "pande2021", "Table 4", "--tiny",
           "--data", str(data), "--glue-tasks", "SST-2", "--catalog-json", str(catalog),
           "--workdir", str(tmp_path / "work"), "--results-dir", str(tmp_path / "res"),
           "--cpu"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    page = (tmp_path / "res" / "pande2021_table4_glue.md").read_text()
    lines = [line for line in page.splitlines() if line.startswith("| ")]
    assert lines[0] == "| Model | #Params | SST-2 | Avg | Δ avg |"
    assert lines[1].startswith("| All Band6 120Tied | ")
    results = json.loads((tmp_path / "res" / "pande2021_table4_glue.json").read_text())
    sst = results["scores"]["g_tied"]["SST-2"]
    assert 0.0 <= sst["accuracy"] <= 100.0 and sst["settings"][0]["valid"] == sst["accuracy"]
    assert results["rows"][0]["params"] > 0
    run = tmp_path / "work" / "pande2021_table4_glue" / "g_tied"
    assert (run / "pretrain" / "seq512" / "checkpoint_last.pt").exists()
    assert "Loaded checkpoint" in (run / "SST-2" / "train.log").read_text()


def test_data_options_of_one_task(catalog, tmp_path, capsys):
    common = ["--catalog-json", str(catalog), "--data-root", str(tmp_path), "--dry-run"]
    with pytest.raises(UsageError, match="--data name.* the data of one task; with --task all"):
        _run(capsys, "yang2019", "Table 2", "--task", "all", "--data", "BIN", *common)
    out = _run(capsys, "yang2019", "Table 2", "--task", "wat17_ja_en", "--pair", "en-zh", *common)
    assert "data: <gettext en-zh corpus>" in out
    assert "embedded gettext corpus en-zh (no WAT17 Ja→En data)" in out


def test_paper_training_flags_at_paper_sizes_only(catalog, tmp_path, capsys):
    """Pande et al. 5.1 (Adam β2 0.997, ε 1e-9, 16k warm-up) comes after the recipe's flags,
    so fairseq takes it; tiny runs keep the tiny recipe."""
    from localnmt.catalog.pande2021 import TRAIN_ARGS

    row = next(r for r in all_rows() if r.arch == "pande2021_2lochead_all6")
    args = reproduce.parse_args(["pande2021", "Table 1", "--cpu"])
    paper = reproduce.row_spec(row, "BIN", tmp_path, "base", args).to_argv()
    assert paper[-len(TRAIN_ARGS) :] == list(TRAIN_ARGS)
    tiny = reproduce.row_spec(row, "BIN", tmp_path, "tiny", args).to_argv()
    assert "(0.9,0.997)" not in tiny and "16000" not in tiny
    assert "--warmup-updates" not in tiny
    tokens = shlex.split(_launch("localnmt-train " + shlex.join(paper), capsys))

    def last(flag: str) -> str:  # fairseq's argparse keeps the last value of a flag
        return tokens[len(tokens) - 1 - tokens[::-1].index(flag) + 1]

    assert last("--warmup-updates") == "16000" and last("--adam-betas") == "(0.9,0.997)"
    assert last("--adam-eps") == "1e-09" and last("--lr") == "0.000349"
    assert tokens.count("--warmup-updates") == 2  # the recipe's 4000 first


def test_glue_step_key_survives_a_moved_workdir(tmp_path) -> None:
    """The GLUE steps' key (and the fingerprint that decides whether pre-training checkpoints
    are resumed) writes paths under the workdir relative to it: the same after a move."""
    from localnmt.runs.glue_runs import portable_command

    def cmd(root):
        save = root / "glue" / "row" / "pretrain"
        return ["x", "--data", str(root / "data" / "pretrain"), "--save-dir", str(save),
                "--lr", "1e-4", "/elsewhere/data"]  # fmt: skip

    old, new = tmp_path / "a", tmp_path / "b"
    assert portable_command(cmd(old), old) == portable_command(cmd(new), new) == [
        "x", "--data", "data/pretrain", "--save-dir", "glue/row/pretrain", "--lr", "1e-4",
        "/elsewhere/data",
    ]  # fmt: skip
