"""Run a child process and hand each line of its output, as it comes, to a callback.

The one loop under fairseq-train's log (:func:`localnmt.runs.launch.run_logged`) and
fairseq-generate's output (:func:`localnmt.runs.generate.run_generate`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import IO, Any

from localnmt import processes


def stream_lines(
    cmd: list[str],
    each_line: Callable[[Any], None],
    *,
    stderr: int | IO | None = subprocess.STDOUT,
    text: bool = True,
    procs_per_node: int = 1,
    env: dict[str, str] | None = None,
) -> int:
    """Run ``cmd`` (started by :func:`localnmt.processes.start`), call ``each_line`` with
    every line of its stdout, and return its exit status.

    ``text``: lines are ``str`` (undecodable bytes replaced), else ``bytes`` exactly as
    written, split at ``b"\\n"`` only. ``stderr``: where the child's stderr goes (default:
    into the same lines). ``env``: another environment than :func:`localnmt.processes.
    child_environment`'s. If this process is interrupted (Ctrl-C, SIGTERM, an error of
    ``each_line``) the child is stopped and waited for before the interruption goes on."""
    popen: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": stderr}
    if text:
        popen.update(text=True, errors="replace", bufsize=1)
    if env is not None:
        popen["env"] = env
    proc = processes.start(cmd, procs_per_node=procs_per_node, **popen)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            each_line(line)
        return proc.wait()
    except BaseException:
        processes.stop(proc)
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
