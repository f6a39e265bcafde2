"""The quickstart end to end on a tiny corpus and budget: report.json's schema, the learning
curves and intervals filled, every system trained for the same number of updates (planned
from the calibration, then again after a first part of every run), and an unchanged rerun
that reuses every step."""

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval"
sys.path.insert(0, str(FIXTURES))

from tinydata import build_data_bin  # noqa: E402

SYSTEM_KEYS = {"name", "row", "bleu", "ci", "updates", "updates_per_s", "params", "curve"}


def _quickstart(workdir: Path, data: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "localnmt.quickstart", "--size", "tiny", "--data", str(data),
           "--workdir", str(workdir), "--budget-minutes", "0.5", "--bootstrap-samples", "100",
           "--systems", "vaswani2017/table-3/transformer-base/base,"
           "yang2018/table-4/localness/base"]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def test_quickstart_end_to_end(tmp_path: Path) -> None:
    data = build_data_bin(tmp_path / "data")
    run = _quickstart(tmp_path / "w", data)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    assert report["budget_minutes"] == 0.5 and report["equal"] == "updates"
    calibrated = report["updates_per_system"]
    # every run trained a first part, then went on to the updates planned again after it
    part = report["replan"]["part_updates"]
    assert 0 < part < calibrated == report["replan"]["updates"]
    assert part < report["calibration"]["updates"] and len(report["replan"]["runs"]) == 2
    assert 0 < report["budget_used_minutes"] < report["elapsed_minutes"]
    measured = report["calibration"]["systems"]  # every system's speed and validation cost
    assert len(measured) == 2 and all(m["updates_per_s"] > 0 for m in measured)
    assert all(m["validation_s"] > 0 for m in measured)
    assert report["machine"]["cores"] >= 1 and report["machine"]["torch"]
    names = [s["name"] for s in report["systems"]]
    assert names == ["vaswani2017/table-3/transformer-base/base",
                     "yang2018/table-4/localness/base"]  # fmt: skip
    for system in report["systems"]:
        assert SYSTEM_KEYS <= set(system)
        low, high = system["ci"]
        assert 0.0 <= low <= high <= 100.0
        assert system["params"] > 0 and system["updates"] == calibrated  # equal updates
        assert system["minutes"] > 0 and system["seeds"][0]["updates"] == calibrated
        assert system["curve"], "no validation point recorded"
        for point in system["curve"]:
            assert {"minutes", "updates", "valid_loss"} <= set(point)
            assert point["minutes"] > 0 and point["valid_loss"] > 0
    assert report["systems"][0]["p_value"] is None
    assert 0.0 < report["systems"][1]["p_value"] <= 1.0
    assert (tmp_path / "w" / "report.png").stat().st_size > 10_000
    assert "95% CI" in (tmp_path / "w" / "report.md").read_text()

    again = _quickstart(tmp_path / "w", data)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "[run ]" not in again.stdout  # calibration, trainings and translations reused
    # a calibration run per system, then each system's training
    assert again.stdout.count("[skip] train:") == 4 and again.stdout.count("[skip] evaluate:") == 2
    assert again.stdout.count("[skip] train-part:") == 2 and "[skip] replan:" in again.stdout
    assert json.loads((tmp_path / "w" / "report.json").read_text())["updates_per_system"] == (
        calibrated
    )
