"""Two runs on one directory, and launchers that are killed: one process per directory (the
second stops, naming the first; a dead holder's lock is taken over), and no trainer outlives
its launcher (SIGTERM: stopped and waited for; SIGKILL: the kernel stops it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localnmt import locks
from localnmt.errors import BusyError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _start_training(data: Path, save: Path) -> subprocess.Popen:
    """A long localnmt-train (it would run for minutes), started in its own session."""
    cmd = [sys.executable, "-m", "localnmt.runs.train", "--data", str(data), "--save-dir",
           str(save), "--arch", "transformer", "--size", "tiny", "--layers", "1", "--cpu",
           "--max-update", "100000", "--no-user-dir", "--", "--seed", "1"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def _wait_for_trainer(launcher: subprocess.Popen, log: Path, timeout: float = 120) -> int:
    """The fairseq process the launcher started, once it is training."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        kids = _children(launcher.pid)
        if kids and log.exists() and "num_updates" in log.read_text(errors="replace"):
            return kids[0]
        assert launcher.poll() is None, launcher.stderr.read()
        time.sleep(0.5)
    raise AssertionError("the trainer did not start")


def _wait_gone(pid: int, timeout: float = 60) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def test_a_second_run_on_the_same_directory_stops_naming_the_first(tiny_data, tmp_path) -> None:
    save = tmp_path / "ck"
    first = _start_training(tiny_data, save)
    try:
        trainer = _wait_for_trainer(first, save / "train.log")
        second = subprocess.run(
            [sys.executable, "-m", "localnmt.runs.train", "--data", str(tiny_data),
             "--save-dir", str(save), "--size", "tiny", "--cpu", "--no-user-dir"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert second.returncode == 2
        assert f"{save} is in use by process {first.pid}" in second.stderr
        assert "localnmt.runs.train" in second.stderr and "Traceback" not in second.stderr
        assert _alive(trainer)  # the first run goes on
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    (tmp_path / ".lock").write_text(json.dumps({"pid": int(dead), "host": "h", "command": "x"}))
    with locks.hold(tmp_path):
        assert locks.holder(tmp_path)["pid"] == os.getpid()
        other = subprocess.run(
            [sys.executable, "-c", "import sys; from localnmt import locks; "
             f"locks.acquire({str(tmp_path)!r})"], capture_output=True, text=True,
        )  # fmt: skip
        assert other.returncode != 0 and BusyError.__name__ in other.stderr
        assert f"in use by process {os.getpid()}" in other.stderr
    locks.acquire(tmp_path)  # released: free again
    locks.release(tmp_path)


def test_sigterm_to_the_launcher_stops_the_trainer(tiny_data, tmp_path) -> None:
    launcher = _start_training(tiny_data, tmp_path / "ck")
    try:
        trainer = _wait_for_trainer(launcher, tmp_path / "ck" / "train.log")
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=120) == 143
        assert not _alive(trainer)  # stopped and waited for before the launcher ended
        assert "localnmt-train: terminated" in launcher.stderr.read()
    finally:
        os.killpg(launcher.pid, signal.SIGKILL) if launcher.poll() is None else None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_to_the_launcher_still_stops_the_trainer(tiny_data, tmp_path) -> None:
    launcher = _start_training(tiny_data, tmp_path / "ck")
    trainer = _wait_for_trainer(launcher, tmp_path / "ck" / "train.log")
    launcher.kill()  # no handler runs: the kernel tells the trainer its parent died
    launcher.wait()
    try:
        assert _wait_gone(trainer), "the trainer outlived its killed launcher"
    finally:
        if _alive(trainer):
            os.kill(trainer, signal.SIGKILL)


def test_a_second_quickstart_on_a_workdir_in_use_stops_at_once(tiny_data, tmp_path) -> None:
    """Two quickstarts on one workdir used to both exit 0, their curves interleaved."""
    work = tmp_path / "w"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from localnmt import locks; "
         f"locks.acquire({str(work)!r}); print('held', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run(
            [sys.executable, "-m", "localnmt.quickstart", "--size", "tiny", "--data",
             str(tiny_data), "--workdir", str(work)], capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
        assert f"{work} is in use by process {holder.pid}" in second.stderr
        assert not (work / "runs").exists()  # nothing of the holder's was touched
    finally:
        holder.kill()
        holder.wait()
