"""torchrun's own failure report, kept out of what a launcher echoes.

When a rank dies, torchrun prints its own traceback (from ``torch/distributed/run.py``)
and a ``ChildFailedError`` block after the rank's error, which the launcher already states in
one line. :class:`LauncherReport` lets every other line through unchanged and holds back
exactly that report; the log file keeps everything.
"""

from __future__ import annotations

from collections.abc import Iterator

TRACEBACK = "Traceback (most recent call last):"
_LAUNCHER_FRAMES = ("torch/distributed/", "torch\\distributed\\")
_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
_RULE = "=" * 20


class LauncherReport:
    """Feed lines in order (:meth:`feed`); what it yields is what to echo."""

    def __init__(self) -> None:
        self._held: list[str] = []  # a traceback not yet known to be torchrun's or a rank's
        self._rules_left = 0  # the ChildFailedError block still to drop ends at its 2nd rule

    def feed(self, line: str) -> Iterator[str]:
        if self._rules_left:
            if line.startswith(_RULE):
                self._rules_left -= 1
            return
        if line.startswith(TRACEBACK) and not self._held:
            self._held = [line]
            return
        if not self._held:
            yield line
            return
        self._held.append(line)
        if line[:1] in (" ", "\t") or line.strip() == "":
            return  # a frame of the traceback
        held, self._held = self._held, []
        if line.startswith(_FAILED) and any(f in h for h in held for f in _LAUNCHER_FRAMES):
            self._rules_left = 2
            return
        yield from held  # a rank's own traceback, or no traceback after all

    def flush(self) -> Iterator[str]:
        """What is still held when the output ends."""
        held, self._held = self._held, []
        yield from held
