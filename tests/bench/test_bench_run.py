"""The benchmark harness on a tiny config produces well-formed JSON, markdown and PNG.

No timing assertions: only the structure of the outputs (one row, one length, one repeat).
"""

from __future__ import annotations

import json

import pytest

from bench import attention_layer as attn
from bench import measure, run
from bench.measure import cpu_peak_memory, interleaved, median_ratio
from bench.outputs import memory_exponent
from bench.synthetic import make_batch, make_dictionary
from localnmt.attention.problem import kernel_names

TINY = [
    "--embed-dim",
    "32",
    "--ffn-dim",
    "64",
    "--vocab",
    "64",
    "--lengths",
    "8",
    "--max-tokens",
    "16",
    "--gen-batch",
    "2",
    "--repeats",
    "1",
    "--warmup",
    "0",
    "--attn-lengths",
    "16",
    "--attn-batch",
    "2",
    "--attn-heads",
    "2",
    "--attn-head-dim",
    "8",
    "--device",
    "cpu",
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    argv = [
        *TINY,
        "--rows",
        "vaswani2017/*/base",
        "--methods",
        "plain",
        "fairseq_mha",
        "--sections",
        "train,generate,attention",
        "--out",
        str(out),
    ]
    assert run.main(argv) == 0
    return out


def test_json_is_well_formed(tiny_run):
    result = json.loads((tiny_run / "bench.json").read_text())
    assert {"machine", "config", "train", "generate", "attention", "errors"} <= set(result)
    machine = result["machine"]
    for key in ("cpu", "cores", "torch", "device", "device_name", "torch_threads"):
        assert machine[key] not in (None, "")
    assert result["errors"] == []
    (train,) = result["train"]
    assert train["row"] == "vaswani2017/table-3/transformer-base/base"
    assert train["length"] == 8 and train["params_delta"] == 0
    for key in ("throughput_ratio", "baseline_tokens_per_s", "candidate_tokens_per_s"):
        assert train[key] > 0
    assert train["baseline_peak_bytes"] > 0 and train["candidate_peak_bytes"] > 0
    assert len(train["baseline_seconds"]) == len(train["candidate_seconds"]) == 1
    (gen,) = result["generate"]
    assert gen["speed_ratio"] > 0 and gen["sentences"] == 2
    assert gen["output_tokens"] == [9]  # 8 steps with EOS masked, then EOS
    methods = {(r["method"], r["length"]) for r in result["attention"]}
    assert methods == {("plain", 16), ("fairseq_mha", 16)}
    for rec in result["attention"]:
        assert rec["status"] == "ok" and rec["time_ratio"] > 0
    paths = {r["method"]: r["path"] for r in result["attention"]}
    assert paths["fairseq_mha"] == "fairseq"
    assert paths["plain"] in kernel_names() + ["dense"]


def test_markdown_and_png(tiny_run):
    text = (tiny_run / "bench.md").read_text()
    assert text.startswith("# localnmt benchmarks")
    machine = json.loads((tiny_run / "bench.json").read_text())["machine"]
    assert machine["cpu"] in text and machine["torch"] in text  # the machine is stated
    for title in ("## Training throughput", "## Beam search", "## One attention layer"):
        assert title in text
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        if lines:  # every table line has the header's number of cells
            assert all(line.endswith("|") for line in lines)
            assert len({line.count(" | ") for line in lines if not set(line) <= set("|-")}) == 1
    assert "| vaswani2017/table-3/transformer-base/base | localnmt_base |" in text
    assert "times in wall seconds" in text  # the clock is stated, and the unit of speeds
    assert "| fairseq baseline tokens/s |" in text and "| fairseq baseline sentences/s |" in text
    assert (tiny_run / "bench.png").read_bytes()[:4] == b"\x89PNG"


def test_band_section_runs_and_states_the_kernel_path(tmp_path):
    """``--sections band`` (bench/band_attention.py through bench.run): rows, no errors, and
    the markdown says which band kernel ran."""
    assert run.main([*TINY, "--sections", "band", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["errors"] == []
    (row,) = result["band"]["rows"]
    assert row["T"] == 16 and row["band_1d_ratio"] > 0 and row["band_2d_peak_mb"] > 0
    assert "Band 1D / 2D: " in result["band"]["markdown"]


def test_bad_section_is_rejected():
    with pytest.raises(SystemExit):
        run.main([*TINY, "--sections", "nonsense"])


def test_interleaved_and_ratio():
    calls = []
    times = interleaved(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        run.torch.device("cpu"),
        warmup=1,
        repeats=3,
    )
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then alternating order
    assert [len(v) for v in times.values()] == [3, 3]
    assert median_ratio([2.0, 4.0, 9.0], [1.0, 1.0, 3.0]) == 3.0


def test_cpu_clock_counts_work_not_waiting():
    """``use_clock("cpu")``: a sleep costs no process CPU time (it does cost wall time)."""
    import time

    cpu = run.torch.device("cpu")
    try:
        measure.use_clock("cpu")
        asleep = measure.time_call(lambda: time.sleep(0.2), cpu)
        busy = measure.time_call(lambda: sum(i * i for i in range(300_000)), cpu)
    finally:
        measure.use_clock("wall")
    assert asleep < 0.1 and busy > 0
    assert measure.time_call(lambda: time.sleep(0.2), cpu) >= 0.2
    with pytest.raises(ValueError, match="wall, cpu"):
        measure.use_clock("gpu")


def test_switched_restores_after_an_error():
    class Owner:
        flag = True

    with pytest.raises(RuntimeError):
        with measure.switched([(Owner, "flag", False)]):
            assert Owner.flag is False
            raise RuntimeError("a form failed")
    assert Owner.flag is True


def test_cpu_peak_memory_sees_torch_allocations():
    import torch

    def alloc():
        x = torch.empty(1 << 20, dtype=torch.uint8)  # 1 MiB, freed at return
        y = torch.empty(1 << 19, dtype=torch.uint8)
        del x, y

    assert cpu_peak_memory(alloc) >= (1 << 20) + (1 << 19)


def test_synthetic_batch_padding():
    d = make_dictionary(50)
    b = make_batch(d, 4, 10, jitter=0.5, seed=0)
    assert len(d) == 50
    assert b.src_tokens.shape == b.target.shape == b.prev_output_tokens.shape == (4, 10)
    for i in range(4):
        n = int(b.src_lengths[i])
        assert (b.src_tokens[i, : 10 - n] == d.pad()).all()  # left padding
        assert b.src_tokens[i, -1] == d.eos()
    assert (b.prev_output_tokens[:, 0] == d.eos()).all()
    for i in range(4):
        t = int(b.target[i].ne(d.pad()).sum())
        assert b.target[i, t - 1] == d.eos() and (b.target[i, t:] == d.pad()).all()
        assert (b.prev_output_tokens[i, 1:t] == b.target[i, : t - 1]).all()
    assert b.target_tokens == int(b.target.ne(d.pad()).sum())


def test_memory_exponent():
    assert memory_exponent([64, 128, 256], [1.0, 2.0, 4.0]) == pytest.approx(1.0)
    assert memory_exponent([64, 128, 256], [1.0, 4.0, 16.0]) == pytest.approx(2.0)
    assert memory_exponent([64], [1.0]) is None


def test_every_registered_method_has_an_entry():
    from localnmt.attention.modifier import modifier_names

    entries = attn.default_entries()
    named = {e.spec.split("[")[0] for e in entries}
    assert set(modifier_names()) <= named
    assert attn.parse_entry("cross:plain") == attn.MethodEntry("cross", "plain")


def test_every_kernel_forced_is_ok_or_declined(tmp_path):
    argv = [
        *TINY,
        "--sections",
        "attention",
        "--methods",
        "plain",
        "csan_1d",
        "localness",
        "--kernels",
        "all",
        "--no-memory",
        "--out",
        str(tmp_path),
    ]
    assert run.main(argv) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    kernels = {r["kernel"] for r in result["attention"]}
    assert kernels == {"auto", *kernel_names()}
    for rec in result["attention"]:
        assert rec["status"] in ("ok", "declined"), rec
        if rec["kernel"] != "auto" and rec["status"] == "ok" and rec["path"] != "dense":
            assert rec["path"] == rec["kernel"]


def test_threads_benchmark_runs_and_prints_its_table(capsys) -> None:
    """bench.small_op_threads on a tiny config: every op row and the GMM step line (no timing
    asserted); the one-thread switch is left as it was."""
    from bench import small_op_threads as bench_threads
    from localnmt.attention import threads

    before = threads.ENABLED
    bench_threads.main(["--batch", "2", "--keys", "4", "--repeats", "1", "--calls", "2"])
    out = capsys.readouterr().out
    assert threads.ENABLED == before
    assert out.count("| GEMM (") == 5 and "| softmax (2, 8, 1, 4) |" in out
    assert "GMM cross-attention decoding step:" in out and "load" in out


def test_band_chunks_benchmark_runs_and_restores_the_chunk_size(capsys) -> None:
    """bench.band_chunks on a tiny config: the allocation line and one row per chunk size (no
    timing asserted); CHUNK_BYTES is left as it was."""
    from bench import band_chunks
    from localnmt.attention.fast.autograd import band_windows

    before = band_windows.CHUNK_BYTES
    band_chunks.main(["--length", "40", "--batch", "2", "--chunk-mib", "1", "2",
                      "--repeats", "1", "--alloc-mb", "1"])  # fmt: skip
    out = capsys.readouterr().out
    assert band_windows.CHUNK_BYTES == before
    assert "zero-fill 1 MiB: fresh tensor" in out
    rows = [line for line in out.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2 and all(line.count("|") == 8 for line in rows)


def test_gmm_decoding_benchmark_runs_and_restores_post(capsys) -> None:
    """bench.gmm_decoding on a tiny config: one row per form (no timing asserted); the GMM
    modifier's post and the C-step switch are left as they were."""
    from bench import gmm_decoding
    from localnmt.attention.fast import gmm_mixture
    from localnmt.attention.fast.native import gmm_step
    from localnmt.attention.methods.gmm import GaussianMixture

    def switches():
        return (GaussianMixture.post, GaussianMixture.fused_output, gmm_step.ENABLED,
                gmm_mixture.PREDICTORS_IN_C)  # fmt: skip

    before = switches()
    gmm_decoding.main(["--length", "3", "--sentences", "1", "--vocab", "100", "--repeats", "1"])
    out = capsys.readouterr().out
    assert switches() == before
    for form in ("baseline", *gmm_decoding.FORMS):
        assert f"| {form} |" in out
    assert "(full, torch ops − predictors-only)" in out


def test_gmm_training_benchmark_runs_and_restores_switches(capsys) -> None:
    """bench.gmm_training on a tiny config: one row per form (no timing asserted); the GMM
    modifier's post_affine and the C and predictor switches are left as they were."""
    from bench import gmm_training
    from localnmt.attention.fast.autograd import predictor_gemms as gmm_predictors
    from localnmt.attention.fast.native import c_bank_head, c_gmm_mixture
    from localnmt.attention.methods.gmm import GaussianMixture

    def switches():
        return (GaussianMixture.post_affine, c_gmm_mixture.ENABLED, gmm_predictors.ENABLED,
                c_gmm_mixture.TEAM, gmm_predictors.HEAD_IN_C, c_bank_head.TEAM)  # fmt: skip

    before = switches()
    gmm_training.main(["--length", "3", "--max-tokens", "6", "--vocab", "100", "--repeats", "1"])
    out = capsys.readouterr().out
    after = switches()
    assert after == before
    for form in ("baseline", *gmm_training.FORMS):
        assert f"| {form} |" in out
    assert "wall clock" in out


def test_gmm_training_benchmark_times_chosen_forms_by_cpu_clock(capsys) -> None:
    from bench import gmm_training

    argv = ["--length", "3", "--max-tokens", "6", "--vocab", "100", "--repeats", "1"]
    try:
        gmm_training.main([*argv, "--forms", "full", "SDPA only", "--clock", "cpu"])
    finally:
        measure.use_clock("wall")
    out = capsys.readouterr().out
    assert "cpu clock" in out
    rows = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| baseline", "| full", "| SDPA only"]  # after the header


def test_concurrency_bench_runs_one_training_alone_and_two_at_once(tiny_data, tmp_path) -> None:
    from bench import concurrency

    out = tmp_path / "out"
    assert concurrency.main(["--methods", "baseline", "--repeats", "1", "--seconds", "2",
                             "--data", str(tiny_data), "--out", str(out)]) == 0  # fmt: skip
    report = json.loads((out / "concurrency.json").read_text())
    localnmt, plain = report["results"]
    assert localnmt["method"] == "baseline" and localnmt["launcher"] == "localnmt"
    assert plain["launcher"] == "fairseq-train" and plain["alone_vs_plain"] == [1.0]
    for result in (localnmt, plain):
        assert len(result["solo_updates"]) == 1 and len(result["pair_updates"][0]) == 2
        assert result["solo_median"] > 0 and len(result["shares"]) == 2
        (cost,) = result["solo_costs"]  # the run's own faults: a training faults in pages
        assert cost["page_faults"] > 1000 and cost["system_s"] >= 0
        assert result["median_page_faults"] == cost["page_faults"]
    assert localnmt["alone_vs_plain"] == [round(localnmt["solo_updates"][0]
                                                / plain["solo_updates"][0], 3)]  # fmt: skip
    text = (out / "concurrency.md").read_text()
    assert "| baseline | localnmt |" in text and "| baseline | fairseq-train |" in text
    # the command and environment each launcher gives a training (bench sets PASSIVE)
    assert "OMP_WAIT_POLICY" not in concurrency.LAUNCHERS["localnmt"][1]()
    assert "OMP_WAIT_POLICY" not in concurrency.LAUNCHERS["fairseq-train"][1]()
    assert concurrency.LAUNCHERS["passive"][1]()["OMP_WAIT_POLICY"] == "PASSIVE"
    assert concurrency.LAUNCHERS["one-thread"][1]()["OMP_NUM_THREADS"] == "1"
    cmd, _ = concurrency._command("baseline", tiny_data, tmp_path / "r", 1.0, "fairseq-train")
    assert cmd[1:3] == ["-m", "fairseq_cli.train"] and cmd[3] == str(tiny_data)


def test_concurrency_summary_without_pairs_and_against_the_plain_median() -> None:
    """A launcher run alone only (``--paired`` leaves it out) has no shares; the slowest solo
    run is set against plain fairseq-train's median solo as well as its own repeat's."""
    from bench.concurrency import markdown, summary

    solo = {"localnmt": [90, 100, 96], "fairseq-train": [100, 80, 100]}
    pairs = {"localnmt": [[60, 61], [58, 59], [62, 60]], "fairseq-train": []}
    ours = summary("baseline", "localnmt", 20.0, solo, pairs)
    assert ours["alone_vs_plain"] == [0.9, 1.25, 0.96] and ours["worst_alone_vs_plain"] == 0.9
    assert ours["slowest_alone_vs_plain_median"] == 0.9 and ours["worst_share"] == 0.604
    assert ours["worst_share_of_plain"] == 0.58
    plain = summary("baseline", "fairseq-train", 20.0, solo, pairs)
    assert "shares" not in plain and "worst_share_of_plain" not in plain
    assert plain["slowest_alone_vs_plain_median"] == 0.8
    assert "median_page_faults" not in plain  # no costs given
    costs = {"localnmt": [{"page_faults": f, "system_s": s}
                          for f, s in ((3e5, 2.0), (2e5, 1.5), (4e5, 2.5))]}  # fmt: skip
    ours = summary("baseline", "localnmt", 20.0, solo, pairs, costs)
    assert ours["median_page_faults"] == 3e5 and ours["median_system_s"] == 2.0
    machine = {"device_name": "a CPU", "device": "cpu", "cores": 2, "torch_threads": 2,
               "torch": "2", "fairseq": "0.12"}  # fmt: skip
    assert "| 0.30, 2.0 |" in markdown([ours], machine)
