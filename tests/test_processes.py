"""The environment of the processes the project starts: torch's own thread settings (the cores
are shared by thread count, localnmt/core_share.py), and several CPU processes of one node
share its cores."""

from __future__ import annotations

import signal
import sys

from localnmt import processes


def test_children_keep_torchs_thread_defaults_unless_the_user_chose(monkeypatch) -> None:
    """Sleeping threads cost a training alone 0.71-0.78 of its speed: no longer set."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = processes.child_environment()
    assert "OMP_WAIT_POLICY" not in env and "KMP_BLOCKTIME" not in env
    assert "OMP_NUM_THREADS" not in env
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert processes.child_environment()["OMP_WAIT_POLICY"] == "ACTIVE"


def test_cpu_processes_of_a_node_share_its_cores(monkeypatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(processes, "usable_cores", lambda: 8)
    assert processes.child_environment(procs_per_node=2)["OMP_NUM_THREADS"] == "4"
    assert processes.child_environment(procs_per_node=16)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert processes.child_environment(procs_per_node=2)["OMP_NUM_THREADS"] == "3"


def test_a_child_sees_the_environment() -> None:
    code = "import os; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('X'))"
    env = processes.child_environment(base={"PATH": "/usr/bin", "X": "1"})
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "None 1"


def test_a_pool_forked_under_the_sigterm_handler_ends_quietly() -> None:
    """SIGTERM raises Terminated in a command's process, but a multiprocessing worker forked
    from it (parallel tokenisation) gets the default back: Pool.terminate used to raise inside
    the workers' queue locks (a traceback per worker, and a worker left waiting forever)."""
    code = (
        "import multiprocessing\n"
        "from localnmt.errors import stop_on_sigterm\n"
        "stop_on_sigterm()\n"
        "for _ in range(10):\n"
        "    with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "        pool.map(abs, range(50))\n"
        "print('done')\n"
    )
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "done"
    assert "Terminated" not in done.stderr


def test_a_sigterm_that_reaches_a_forked_child_before_its_reset_still_ends_it() -> None:
    """The SIGTERM is sent by a fork hook that runs in the child before the project's own
    (registered first): blocked across the fork, it stays pending and ends the child once the
    default is back, where before it was dropped and the worker lived on. The parent's mask is
    as it was."""
    code = (
        "import os, signal\n"
        "os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
        "from localnmt.errors import stop_on_sigterm\n"
        "stop_on_sigterm()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(7)  # still alive: the signal was lost\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
        "print(signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []))\n"
    )
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(-int(signal.SIGTERM)), "False"]


def test_a_main_called_from_python_leaves_the_sigterm_handler_as_it_was() -> None:
    import signal

    from localnmt.errors import entry_point

    before = signal.getsignal(signal.SIGTERM)
    entry_point("demo")(lambda: 0)()
    assert signal.getsignal(signal.SIGTERM) is before
