"""localnmt.machine: the summary every report carries, typed, and its JSON."""

from __future__ import annotations

import json

from localnmt.machine import MachineSummary, describe_machine, machine_summary


def test_the_summary_round_trips_through_json_with_its_keys_in_order():
    here = machine_summary()
    data = json.loads(json.dumps(here.to_json()))
    assert list(data) == ["cpu", "cores", "gpu", "torch", "python", "load_average"]
    assert MachineSummary.from_json(data) == here


def test_one_line_with_or_without_a_gpu_and_a_load():
    cpu = MachineSummary("AMD EPYC", 2, None, "2.13.0", "3.11.7", [0.44, 1.0, 2.0])
    assert cpu.describe() == "AMD EPYC, 2 cores, no GPU, torch 2.13.0, load 0.4"
    gpu = MachineSummary("Xeon", 16, "NVIDIA H200", "2.11.0", "3.12", None)
    assert gpu.describe() == "Xeon, 16 cores, NVIDIA H200, torch 2.11.0"
    # the benches' dicts carry more keys (device, threads): the same line
    assert describe_machine({**cpu.to_json(), "device": "cpu", "threads": 2}) == cpu.describe()
