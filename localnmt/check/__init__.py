"""``localnmt-check`` (``python -m localnmt.check``): is this install sound on this machine?

In the spirit of ``python -m xformers.info`` and ``python -m torch.utils.collect_env``: the
environment (Python, torch, fairseq, transformers, the device, the C extensions,
FlexAttention, threads); for every method family and a few lengths, which kernel runs here and
why each other kernel declines; then a self-test with a PASS/FAIL table: every method's
forward and backward, in float32 and each low precision the device supports, through the
kernels and the dense path against the reference path; step-by-step decoding against the full
pass; a few training updates of a tiny model per method with a finite, falling loss; and,
where transformers is installed in ``localnmt.hf``'s range, a tiny MarianMT model with a
method at every site (it imports, cached generation equals uncached, a few updates lower the
loss, saving and loading keep its logits). Exit status 1 on any FAIL.

    localnmt-check --quick          # seconds on a 2-core CPU
    localnmt-check                  # fuller: longer sequences (band, FlexAttention), more updates
    localnmt-check --json > check.json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from localnmt.errors import UsageError, entry_point

SECTIONS = ("kernels", "forward", "incremental", "training", "transformers")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="localnmt-check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="short sequences, fewer updates")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument("--out", help="also write the JSON document to this file")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)} (the environment always)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the options and print what would run, without running it",
    )
    p.add_argument(
        "--methods",
        nargs="+",
        metavar="NAME",
        help="only cases whose spec names one of these methods ('plain': no method)",
    )
    return p


def _selected(spec: str, methods: list[str] | None) -> bool:
    if not methods:
        return True
    from localnmt.attention.spec import parse_spec

    names = {item.method for item in parse_spec(spec)} or {"plain"}
    return bool(names & set(methods))


def run_checks(args: argparse.Namespace) -> dict[str, Any]:
    """Every section asked for; returns the JSON-ready document."""
    import torch

    from localnmt.check import environment, kernel_choice
    from localnmt.check.layer_runs import METHOD_CASES

    start = time.perf_counter()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise UsageError(f"unknown section(s) {sorted(unknown)} (valid: {SECTIONS})")
    quick = args.quick
    cases = [(site, spec) for site, spec in METHOD_CASES if _selected(spec, args.methods)]
    families = [f for f in kernel_choice.FAMILIES if _selected(f[1], args.methods)]
    doc: dict[str, Any] = {
        "mode": "quick" if quick else "full",
        "environment": environment.collect(device),
    }
    threads = torch.get_num_threads()
    if device.type == "cpu":  # tiny layers: more threads only wait for each other (busy CPUs:
        torch.set_num_threads(1)  # 20 s instead of 0.2 s for 6 updates of a tiny model)
    try:
        _run_sections(doc, sections, cases, families, device, quick)
    finally:
        torch.set_num_threads(threads)
    doc["self_test_threads"] = 1 if device.type == "cpu" else threads
    doc["seconds"] = round(time.perf_counter() - start, 1)
    doc["load_average_after"] = environment.load_average()
    return doc


def _run_sections(
    doc: dict[str, Any],
    sections: list[str],
    cases: list[tuple[str, str]],
    families: list[tuple[str, str]],
    device: Any,
    quick: bool,
) -> None:
    """The kernel choices and the self-test's results, into ``doc``."""
    import torch

    from localnmt.check import kernel_choice, selftest

    if "kernels" in sections:
        lengths = [16, 256] if quick else [16, 256, 1024]
        doc["kernel_choices"] = kernel_choice.kernel_choices(device, lengths, families)
    results = []
    if "forward" in sections:
        dtypes = [torch.float32, *selftest.low_precision_dtypes(device)]
        for length in [10] if quick else [10, 300]:
            for site, spec in cases:
                results += selftest.forward_backward(
                    site, spec, dtypes, device, length, low_against_same_dtype=length > 10
                )
    if "incremental" in sections:
        for site, spec in cases:
            if site != "encoder_self":
                results.append(selftest.incremental(site, spec, device))
    if "training" in sections:
        updates = 6 if quick else 20
        dtypes = [torch.float32]
        if not quick and device.type == "cuda":
            dtypes += selftest.low_precision_dtypes(device)
        for site, spec in families:
            for dtype in dtypes:
                results.append(selftest.training(site, spec, device, updates, dtype))
    if "transformers" in sections:
        from localnmt.check.hf_runs import transformers_checks

        results += transformers_checks(device, 6 if quick else 20)
    doc["results"] = [r.as_dict() for r in results]
    doc["summary"] = {s: sum(r.status == s for r in results) for s in ("PASS", "FAIL", "SKIP")}


def format_document(doc: dict[str, Any]) -> str:
    """The environment, the kernel choices and the PASS/FAIL table, for people."""
    from localnmt.check.check_results import CheckResult, format_table
    from localnmt.check.environment import format_environment
    from localnmt.check.kernel_choice import format_choices

    parts = ["localnmt-check (" + doc["mode"] + ")", "", format_environment(doc["environment"])]
    if "kernel_choices" in doc:
        choices = format_choices(doc["kernel_choices"])
        parts += ["", "kernel choice (training forward, float32):", choices]
    if doc["results"]:
        parts += ["", format_table([CheckResult(**r) for r in doc["results"]])]
    load = doc.get("load_average_after")
    threads = f", self-test on {doc['self_test_threads']} CPU thread(s)"
    parts += [
        "",
        f"{doc['seconds']} s{threads}" + (f", load average {load[0]} after" if load else ""),
    ]
    return "\n".join(parts)


def plan(args: argparse.Namespace) -> str:
    """What a run with these options would check (sections, cases, device)."""
    import torch

    from localnmt.check.kernel_choice import FAMILIES
    from localnmt.check.layer_runs import METHOD_CASES

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise UsageError(f"unknown section(s) {sorted(unknown)} (valid: {SECTIONS})")
    cases = [c for c in METHOD_CASES if _selected(c[1], args.methods)]
    families = [f for f in FAMILIES if _selected(f[1], args.methods)]
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return (
        f"localnmt-check ({'quick' if args.quick else 'full'}) on {device}: sections "
        f"{','.join(sections)}; {len(cases)} layer cases, {len(families)} method families"
    )


@entry_point("localnmt-check")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device and args.device.startswith("cuda") and not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            parser.error(f"--device {args.device}: torch {torch.__version__} sees no CUDA device")
    if args.dry_run:
        print(plan(args))
        return 0
    doc = run_checks(args)
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text if args.json else format_document(doc))
    return 1 if doc["summary"]["FAIL"] else 0
