"""The thread count of a training or decoding from what else runs on the machine
(localnmt/core_share.py): the parsing of /proc, the arithmetic and the timing of decisions."""

from __future__ import annotations

import sys

import pytest

from localnmt import core_share
from localnmt.core_share import (
    CoreShare,
    machine_running,
    others_count,
    steady_others,
    task_running,
    threads_for,
)

STAT = "cpu  1 2 3\nctxt 99\nprocs_running 5\nprocs_blocked 0\n"


def test_proc_texts_are_read() -> None:
    assert machine_running(STAT) == 5
    with pytest.raises(ValueError):
        machine_running("cpu 1 2 3\n")
    assert task_running("123 (python) R 1 2 3")
    assert not task_running("123 (python) S 1 2 3")
    assert task_running("7 (a) S b) R 1 2")  # a name with ") S" in it: the last ')' counts


def test_the_threads_are_the_cores_left_at_least_one_at_most_the_cap() -> None:
    assert threads_for(2, 0) == 2
    assert threads_for(2, 1) == 1
    assert threads_for(2, 3) == 1
    assert threads_for(16, 6) == 10
    assert threads_for(16, 0, cap=4) == 4
    assert threads_for(16, 14, cap=4) == 2


def test_only_steady_work_counts() -> None:
    """A spike in a few samples (transient threads: 0.8 on average) is not other work; a
    second training running in nearly every sample is."""
    assert steady_others([0, 0, 0, 0, 0, 0, 2, 2, 2, 2]) == 0  # mean 0.8
    assert steady_others([0, 0, 3, 3, 3, 3, 3, 3, 3, 3]) == 3
    assert steady_others([1, 1, 1, 0, 1, 1, 2, 1, 1, 1]) == 1  # a training beside, one thread
    assert steady_others([0, 1, 1, 2]) == 1
    assert steady_others([0, 2]) == 0
    assert steady_others([2]) == 2


def test_an_own_thread_changing_state_between_reads_is_not_other_work() -> None:
    """procs_running counts this process's OpenMP worker still spinning; by the next read of
    its own threads it sleeps: the larger of the own counts around it is this process's."""
    assert others_count(total=3, own_before=3, own_after=2) == 0
    assert others_count(total=3, own_before=2, own_after=3) == 0
    assert others_count(total=5, own_before=2, own_after=2) == 3
    assert others_count(total=1, own_before=2, own_after=2) == 0


def test_the_first_tick_decides_at_once_from_a_few_samples() -> None:
    """Two trainings started together spin against each other until they decide: the first
    update (the slowest) decides from samples taken then, not from one sample or after a
    whole window."""
    gaps: list[float] = []
    calls: list[int] = []
    others = iter([1, 1, 0, 1, 1])  # the other training, still starting, caught in 4 of 5
    share = CoreShare(2, others=lambda: next(others), set_threads=calls.append,
                      sleep=gaps.append)  # fmt: skip
    share.tick()
    assert calls == [1] and share.samples == []
    assert gaps == [core_share.FIRST_GAP_S] * (core_share.FIRST_SAMPLES - 1)
    alone = CoreShare(2, others=lambda: 0, set_threads=calls.append, sleep=gaps.append)
    alone.tick()
    assert calls == [1, 2]


def test_samples_and_decisions_follow_the_clock() -> None:
    now = [0.0]
    others = iter([0] * core_share.FIRST_SAMPLES + [0, 2, 2, 1, 1, 1, 1, 1, 1, 1])
    calls: list[int] = []
    share = CoreShare(2, sample_s=0.2, every_s=1.0, clock=lambda: now[0],
                      others=lambda: next(others), set_threads=calls.append,
                      sleep=lambda s: None)  # fmt: skip
    now[0] = 0.0  # the first tick: a decision from its own samples
    share.tick()
    assert calls == [2]
    for t in (0.125, 0.25, 0.375):  # one sample (0.25: 0); the others too soon after the last
        now[0] = t
        share.tick()
    assert share.samples == [0] and calls == [2]
    now[0] = 1.0  # second sample (2): one sample of two is not steady work -> unchanged
    share.tick()
    assert calls == [2] and share.samples == []
    for t in (1.25, 1.5, 1.75, 2.0):  # 2, 1, 1, 1: one running in every sample -> one thread
        now[0] = t
        share.tick()
    assert calls == [2, 1] and share.threads == 1
    for t in (2.25, 2.5, 2.75, 3.0):  # 1, 1, 1, 1: unchanged, not set again
        now[0] = t
        share.tick()
    assert calls == [2, 1]


def test_a_machine_left_alone_gets_every_core_back() -> None:
    now = [0.0]
    counts = [3]
    calls: list[int] = []
    share = CoreShare(2, sample_s=0.0, every_s=1.0, clock=lambda: now[0],
                      others=lambda: counts[0], set_threads=calls.append,
                      sleep=lambda s: None)  # fmt: skip
    share.tick()
    counts[0] = 0
    now[0] = 1.0
    share.tick()
    assert calls == [1, 2]


def test_no_sample_no_decision() -> None:
    calls: list[int] = []
    share = CoreShare(2, sample_s=0.0, every_s=0.0, others=lambda: None,
                      set_threads=calls.append, sleep=lambda s: None)  # fmt: skip
    share.tick()
    share.tick()
    assert calls == []


def test_the_user_thread_setting_caps(monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert core_share.user_thread_cap() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    assert core_share.user_thread_cap() is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert core_share.user_thread_cap() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_this_machine_is_read() -> None:
    others = core_share.others_running()
    assert isinstance(others, int) and others >= 0


def test_cpu_trainings_and_decodings_look_up_their_share(monkeypatch) -> None:
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.trainer import Trainer

    from localnmt.runs import fairseq_entry

    ticks: list[int] = []

    class Share:
        def tick(self) -> None:
            ticks.append(1)

    monkeypatch.setattr(core_share, "install_in_process", lambda: Share())
    monkeypatch.setattr(Trainer, "train_step", lambda self, samples: "trained")
    monkeypatch.setattr(SequenceGenerator, "generate", lambda self, models, sample: "decoded")
    fairseq_entry.share_cores(["data-bin", "--arch", "transformer"])  # not --cpu: untouched
    assert Trainer.train_step(None, []) == "trained" and ticks == []
    fairseq_entry.share_cores(["data-bin", "--cpu"])
    assert Trainer.train_step(None, []) == "trained" and ticks == [1]
    assert SequenceGenerator.generate(None, [], {}) == "decoded" and ticks == [1, 1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_data_loaders_workers_are_this_trainings_own_threads() -> None:
    """A busy child (a data loader worker) is runnable and found among this process's
    children, so :func:`others_running` does not count it as other work."""
    import os
    import subprocess
    import time

    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert str(child.pid) in core_share._children(str(os.getpid()))
        assert core_share._running_threads(str(child.pid)) == 1  # runnable, waiting or not
    finally:
        child.kill()
        child.wait()
    assert core_share._running_threads(str(child.pid)) == 0  # gone
