"""The quickstart's typed run record: report.json and report.md as before for the same inputs
(tests/fixtures/quickstart holds what the code wrote when the run was a dict, in each
schedule), and the record's exact round trip through JSON."""

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from localnmt.evaluation.results import TrainingRecord
from localnmt.machine import MachineSummary
from localnmt.quickstart import cli
from localnmt.quickstart.calibration import Calibration, SystemCost
from localnmt.quickstart.collected_results import corpus_info
from localnmt.quickstart.report import SeedRun, SystemResult, write_json, write_markdown
from localnmt.quickstart.run_record import Allotment, Corpus, CorpusSizes, QuickstartRun
from localnmt.runs.timed_validation import CurvePoint

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "quickstart"
MACHINE = MachineSummary("CPU X", 2, None, "2.13.0", "3.11.9", [0.5, 0.25, 0.75])
CALIBRATION = Calibration((SystemCost(2.5, 3.0, 10.0), SystemCost(1.25, 4.5, 12.0)), 1.5, 321)
MODES = {  # name: (equal, updates, seeds, gettext pair, load average at the end)
    "calibrated": ("updates", None, 1, "en-de", (0.6, 0.5, 0.5)),
    "updates": ("updates", 500, 2, None, None),
    "time": ("time", None, 1, "en-zh", (1.25, 1.0, 0.5)),
}


def _systems(seeds: int) -> list[SystemResult]:
    out = []
    for i, (name, bleu) in enumerate((("base", 12.0), ("loc", 13.5))):
        curve = [CurvePoint(1.0 + k, 10 * (k + 1), 8.0 - k - i) for k in range(3)]
        runs = [SeedRun(seed=s, bleu=bleu + s / 10, updates=30, minutes=3.25, updates_per_s=1.5,
                        params=1_234_567, curve=curve,
                        training=TrainingRecord("c.pt", 30, 30 if s == 1 else 40, s == 1))
                for s in range(1, seeds + 1)]  # fmt: skip
        out.append(SystemResult(name=name, row=name.upper(), arch="a", args=["--x", "1"],
                                bleu=bleu, ci=[bleu - 1, bleu + 1],
                                p_value=None if i == 0 else 0.0123, updates=30,
                                updates_per_s=1.5, params=1_234_567, curve=curve,
                                bleu_sd=0.07 if seeds > 1 else None, minutes=3.25,
                                seeds=runs))  # fmt: skip
    return out


def _run(mode: str, data_bin: Path, monkeypatch) -> QuickstartRun:
    """The record as :func:`localnmt.quickstart.cli.run` builds it: at the start, then the
    schedule's allotment, then the corpus and the scoring."""
    equal, updates, seeds, pair, load_end = MODES[mode]
    monkeypatch.setattr(cli, "calibrate", lambda *a, **k: CALIBRATION)
    args = SimpleNamespace(equal=equal, updates=updates, seeds=seeds, validations=8,
                           calibration_minutes=None)  # fmt: skip
    record = QuickstartRun(machine=MACHINE, budget_minutes=24.0, equal=equal, seeds=seeds,
                           sizing="32-dim 3+3-layer Transformer", device="cpu",
                           bootstrap_samples=1000)  # fmt: skip
    schedule, allotment = cli.schedule_for(args, [("base", None), ("loc", None)], data_bin, 24.0)
    assert (schedule.updates, schedule.minutes) == (
        (allotment.updates_per_system, None) if equal == "updates"
        else (None, allotment.minutes_per_system)
    )  # fmt: skip
    return replace(record, allotment=allotment, corpus=corpus_info(data_bin, pair),
                   test_sentences=24, signature="nrefs:1|x", load_average_end=load_end,
                   elapsed_minutes=27.5)  # fmt: skip


@pytest.mark.parametrize("mode", list(MODES))
def test_report_files_are_as_before(mode, tiny_data, tmp_path, monkeypatch) -> None:
    record = _run(mode, tiny_data, monkeypatch)
    systems = _systems(record.seeds)
    for path in (write_json(tmp_path, systems, record), write_markdown(tmp_path, systems, record)):
        written = path.read_text(encoding="utf-8").replace(str(tiny_data), "DATA_BIN")
        assert written == (GOLDEN / f"report_{mode}{path.suffix}").read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", list(MODES))
def test_the_record_round_trips_through_report_json(mode) -> None:
    report = json.loads((GOLDEN / f"report_{mode}.json").read_text(encoding="utf-8"))
    report.pop("systems")
    record = QuickstartRun.from_json(report)
    again = record.to_json()
    assert json.dumps(again) == json.dumps(report)  # same keys, same order, same values
    assert QuickstartRun.from_json(json.loads(json.dumps(again))) == record


def test_the_parts_round_trip_exactly() -> None:
    assert Calibration.from_json(CALIBRATION.to_json()) == CALIBRATION
    for allotment in (Allotment(11.25, 321, CALIBRATION), Allotment(updates_per_system=500),
                      Allotment(minutes_per_system=12.0)):  # fmt: skip
        assert Allotment.from_json(allotment.to_json()) == allotment
    assert list(Allotment(11.25, 321, CALIBRATION).to_json()) == [
        "minutes_per_system", "calibration", "updates_per_system"]  # fmt: skip
    assert Allotment(minutes_per_system=12.0).to_json() == {"minutes_per_system": 12.0}
    corpus = Corpus("c", "d", CorpusSizes(3, 2, 1), "/bin", ("en", "de"))
    assert list(corpus.to_json()) == ["corpus", "corpus_description", "corpus_sizes",
                                      "data_bin", "languages"]  # fmt: skip
    assert corpus.to_json()["corpus_sizes"] == {"train": 3, "valid": 2, "test": 1}
    assert Corpus.from_json(json.loads(json.dumps(corpus.to_json()))) == corpus


def test_an_incomplete_run_is_no_report(tmp_path) -> None:
    record = QuickstartRun(machine=MACHINE, budget_minutes=24.0, equal="updates", seeds=1,
                           sizing="s", device="cpu", bootstrap_samples=10)  # fmt: skip
    assert record.missing() == ["allotment", "corpus", "test_sentences", "signature",
                                "elapsed_minutes"]  # fmt: skip
    with pytest.raises(ValueError, match="not complete: no corpus, test_sentences"):
        replace(record, allotment=Allotment(updates_per_system=5)).to_json()
    assert not (tmp_path / "report.json").exists()
    with pytest.raises(ValueError):
        write_json(tmp_path, _systems(1), record)
    assert not (tmp_path / "report.json").exists()
