"""Train one quickstart system for its share of the budget, as a resumable step.

The step's fingerprint (:mod:`localnmt.data.steps`) covers the data, the architecture and every
training option, so a rerun with other settings retrains (the old run is kept aside) and an
identical rerun skips a finished run or resumes an interrupted one from ``checkpoint_last.pt``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from localnmt.data.steps import StepRunner, fingerprint

_PROGRESS = ("train_inner", "| valid |", "done training", "Stopping training")


def data_fingerprint(data_bin: Path) -> str:
    """Dictionaries by content, binaries by name and size (cheap even for WMT-size data)."""
    digest = hashlib.sha256()
    for path in sorted(Path(data_bin).iterdir()):
        if path.name.startswith("dict.") or path.name.endswith(".json"):
            digest.update(path.name.encode() + path.read_bytes())
        elif path.suffix in (".bin", ".idx"):
            digest.update(f"{path.name}:{path.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def train_command(
    data_bin: Path, save_dir: Path, arch: str, args: list[str],
    minutes: float, validate_every: float, user_dir: str | None,
) -> list[str]:  # fmt: skip
    """The fairseq-train command (through :mod:`localnmt.runs.fairseq_entry`)."""
    cmd = [
        sys.executable, "-m", "localnmt.runs.fairseq_entry", "train", str(data_bin),
        "--arch", arch,
        "--save-dir", str(save_dir),
        *args,
        "--stop-time-hours", f"{minutes / 60:.5f}",
        "--validate-every-minutes", f"{validate_every:.4f}",
        "--curve", str(save_dir.parent / "curve.jsonl"),
        # only the wall-clock validations: no per-epoch validation or checkpoint
        "--validate-interval", "100000", "--save-interval", "100000",
        "--no-epoch-checkpoints", "--keep-interval-updates", "1",
    ]  # fmt: skip
    if user_dir:
        cmd += ["--user-dir", user_dir]
    return cmd


def run_logged(cmd: list[str], log_path: Path, echo: Callable[[str], None]) -> None:
    """Run ``cmd``, appending its output to ``log_path`` and echoing progress lines.

    Ctrl-C reaches the child too (same process group); we wait for it to exit, then re-raise.
    """
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    with open(log_path, "a", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)  # fmt: skip
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                out.write(line)
                if any(key in line for key in _PROGRESS):
                    echo("    " + line.rstrip().split(" | ", 3)[-1][:150])
            code = proc.wait()
        except KeyboardInterrupt:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    if code != 0:
        raise SystemExit(f"training failed (exit {code}), see {log_path}")


def aside(run_dir: Path) -> Path:
    """A new name beside ``run_dir`` for a run made with other settings (never overwritten)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kept, n = run_dir.with_name(f"{run_dir.name}.old-{stamp}"), 1
    while kept.exists():
        n += 1
        kept = run_dir.with_name(f"{run_dir.name}.old-{stamp}-{n}")
    return kept


def train_system(
    runner: StepRunner,
    name: str,
    run_dir: Path,
    data_bin: Path,
    arch: str,
    args: list[str],
    minutes: float,
    validate_every: float,
    user_dir: str | None,
    log: Callable[[str], None],
) -> str:
    """Train (or reuse, or resume) one system; returns the step's name."""
    params = {
        "data": data_fingerprint(data_bin),
        "arch": arch,
        "args": list(args),
        "minutes": round(minutes, 4),
        "validate_every": round(validate_every, 4),
    }
    fp = fingerprint(params)
    settings = run_dir / "settings.json"
    save_dir = run_dir / "checkpoints"

    def train() -> None:
        if settings.exists() and json.loads(settings.read_text())["fingerprint"] != fp:
            kept = aside(run_dir)
            log(f"{name}: the run there was made with other settings; kept it as {kept.name}")
            run_dir.rename(kept)
        run_dir.mkdir(parents=True, exist_ok=True)
        if (save_dir / "checkpoint_last.pt").exists():
            log(f"{name}: resuming the interrupted run from its last checkpoint")
        settings.write_text(json.dumps({"fingerprint": fp, **params}, indent=2) + "\n")
        log(f"{name}: training for {minutes:.1f} min (validation every {validate_every:.2f} min)")
        cmd = train_command(data_bin, save_dir, arch, args, minutes, validate_every, user_dir)
        run_logged(cmd, run_dir / "train.log", log)

    step = f"train.{name}"
    runner.run(step, train, params=params,
               outputs=[save_dir / "checkpoint_last.pt", run_dir / "curve.jsonl"])  # fmt: skip
    return step
