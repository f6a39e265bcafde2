"""localnmt-check: its JSON, its table, and that a wrong kernel makes it FAIL with exit 1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from localnmt.attention import dispatch
from localnmt.check import SECTIONS, main


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_json_of_a_passing_run(capsys, tmp_path):
    out_file = tmp_path / "check.json"
    code, out = run(capsys, "--quick", "--json", "--methods", "csan_1d", "gmm",
                    "--out", str(out_file))  # fmt: skip
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["FAIL"] == 0 and doc["mode"] == "quick"
    assert json.loads(out_file.read_text()) == doc
    env = doc["environment"]
    assert env["torch"] == torch.__version__ and env["device"]["type"] == "cpu"
    assert {e["name"] for e in env["c_extensions"]} == {
        "_band",
        "_gmm_mixture",
        "_gmm_step",
        "_relative",
    }
    assert {e["state"] for e in env["c_extensions"]} <= {"built", "stale", "missing"}
    assert isinstance(env["flex_attention"]["available"], bool) and env["flex_attention"]["why"]
    assert env["threads"]["torch_threads"] == torch.get_num_threads()
    found = env["transformers"]
    assert found["requirement"].startswith("transformers>=")
    assert isinstance(found["supported"], bool) and isinstance(found["t5"], bool)
    assert isinstance(env["threads"]["c_kernels_on_torch_threads"], bool)
    sections = {r["section"] for r in doc["results"]}
    assert sections == {"forward/backward", "incremental", "training", "transformers"}
    names = [r["name"] for r in doc["results"]]
    for dtype in ("float32", "float16", "bfloat16"):  # the CPU computes all three
        assert f"encoder_self:csan_1d[window=3] T=10 {dtype}" in names
    assert "cross:gmm T=7" in names and "cross:gmm float32 x6" in names
    assert all(r["status"] == "PASS" and r["seconds"] >= 0 for r in doc["results"])
    choices = {(c["site"], c["spec"], c["length"]): c["calls"] for c in doc["kernel_choices"]}
    band = choices[("encoder_self", "csan_1d", 256)]
    assert band[0]["kernel"] == "band" and set(band[0]["declined"]) == {
        "shared_source", "flex", "gaussian_fold", "relative", "sdpa"
    }  # fmt: skip
    gmm_ops = [c["op"] for c in choices[("cross", "gmm", 16)]]
    assert gmm_ops == ["attention", "gmm mixture"]  # the dense path, its post stage γ


def test_table_of_a_passing_run(capsys):
    code, out = run(capsys, "--quick", "--methods", "plain", "--sections", "incremental")
    assert code == 0
    assert "C extensions" in out and "FlexAttention" in out and "threads" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("incremental ")]
    assert [(r[1], r[3]) for r in rows] == [
        ("decoder_self:plain", "PASS"),
        ("cross:plain", "PASS"),
    ]
    assert "2 PASS, 0 FAIL, 0 SKIP" in out


def test_a_wrong_kernel_fails_with_exit_1(capsys, monkeypatch):
    """Noise added by the SDPA kernel: the forward/backward rows that ran it FAIL, naming it,
    and the exit status is 1; the dense path's rows still PASS."""
    from localnmt.attention.fast import sdpa

    exact = sdpa.masked_sdpa

    def noisy(q, k, v, allowed, bias, dropout_p):
        out = exact(q, k, v, allowed, bias, dropout_p)
        return out + 1e-2 * torch.randn_like(out)

    monkeypatch.setattr(sdpa, "masked_sdpa", noisy)
    code, out = run(capsys, "--quick", "--json", "--methods", "plain", "--sections", "forward")
    doc = json.loads(out)
    assert code == 1 and doc["summary"]["FAIL"] >= 1
    failed = [r for r in doc["results"] if r["status"] == "FAIL"]
    assert all("kernels [sdpa]" in r["detail"] for r in failed)
    assert {r["name"] for r in failed} >= {"encoder_self:plain T=10 float32"}


def test_a_crashing_check_fails_and_the_others_run(capsys, monkeypatch):
    from localnmt.check import selftest

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(selftest, "build_tiny_model", broken)
    code, out = run(capsys, "--quick", "--json", "--methods", "plain", "--sections",
                    "incremental,training")  # fmt: skip
    doc = json.loads(out)
    assert code == 1
    training = [r for r in doc["results"] if r["section"] == "training"]
    assert training and all(r["status"] == "FAIL" and "boom" in r["detail"] for r in training)
    assert all(r["status"] == "PASS" for r in doc["results"] if r["section"] == "incremental")


def test_unknown_section_is_an_error(capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_:
        main(["--sections", "nope"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err == "localnmt-check: error: unknown section(s) ['nope'] (valid: " \
        f"{SECTIONS})\n"  # fmt: skip


def test_module_entry_point_parses_its_options():
    done = subprocess.run([sys.executable, "-m", "localnmt.check", "--help"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "--quick" in done.stdout and "--json" in done.stdout


def test_kernels_trace_is_clean_after_a_run(capsys):
    run(capsys, "--quick", "--json", "--methods", "plain", "--sections", "kernels")
    with dispatch.trace() as seen:
        pass
    assert seen.calls == []


def test_a_cuda_device_without_cuda_is_an_error(capsys):
    import pytest

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit) as exit_info:
        main(["--device", "cuda", "--quick"])
    assert exit_info.value.code == 2
    assert "sees no CUDA device" in capsys.readouterr().err


def test_the_transformers_line_says_what_localnmt_hf_does_with_it():
    from localnmt.check.environment import format_transformers

    need = "transformers>=4.53,<6"
    line = format_transformers({"version": None, "supported": False, "t5": False,
                                "requirement": need})  # fmt: skip
    assert line.startswith("not installed") and "pip install 'localnmt[hf]'" in line
    line = format_transformers({"version": "4.40.0", "supported": False, "t5": False,
                                "requirement": need})  # fmt: skip
    assert line == f"4.40.0: outside {need}, localnmt.hf refuses it"
    line = format_transformers({"version": "4.53.0", "supported": True, "t5": False,
                                "requirement": need})  # fmt: skip
    assert "runs with it" in line and "not the T5 family" in line


def test_the_transformers_section_runs_a_marian_model_with_methods(capsys, monkeypatch):
    """Where transformers is in range: it imports, and a tiny Marian model with a method at
    every site generates alike with and without the cache, learns, and saves and loads; where
    the import breaks (a broken optional dependency), one FAIL saying how; where transformers
    is missing, one SKIP saying what to install."""
    import sys

    from localnmt.check import hf_runs

    pytest.importorskip("transformers")
    results = hf_runs.transformers_checks(torch.device("cpu"), 6)
    assert [r.name for r in results] == ["import", "marian: generate with the cache",
                                         "marian: training x6",
                                         "marian: save_pretrained, from_pretrained"]  # fmt: skip
    assert all(r.status == "PASS" for r in results), [r.detail for r in results]
    monkeypatch.setitem(sys.modules, "transformers", None)  # importing it raises
    broken = hf_runs.transformers_checks(torch.device("cpu"), 6)
    assert [(r.name, r.status) for r in broken] == [("import", "FAIL")]
    assert "ImportError" in broken[0].detail or "ModuleNotFoundError" in broken[0].detail
    missing = {"version": None, "supported": False, "t5": False, "requirement": "x"}
    monkeypatch.setattr(hf_runs, "transformers_status", lambda: missing)
    (skipped,) = hf_runs.transformers_checks(torch.device("cpu"), 6)
    assert skipped.status == "SKIP" and "not installed" in skipped.detail
