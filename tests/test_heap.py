"""localnmt.heap: glibc keeps freed memory for the next update instead of faulting it in again."""

from __future__ import annotations

import subprocess
import sys

import pytest

from localnmt import heap


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


def test_both_thresholds_are_fixed() -> None:
    libc = FakeLibc()
    assert heap.keep_freed_memory(libc) is True
    assert libc.calls == [(-3, 32 * 2**20), (-1, 512 * 2**20)]


def test_a_refusal_is_reported_and_nothing_else_is_asked() -> None:
    libc = FakeLibc(answer=0)
    assert heap.keep_freed_memory(libc) is False
    assert libc.calls == [(-3, 32 * 2**20)]


def test_without_glibc_nothing_changes(monkeypatch) -> None:
    monkeypatch.setattr(heap, "_glibc", lambda: None)
    assert heap.keep_freed_memory() is False


#: a child that allocates 40 blocks of 4 MiB, writes them, frees them, five times, and prints
#: the page faults of the last three rounds (the first two let glibc's own rule adapt)
ROUNDS = r"""
import ctypes, resource, sys
from localnmt import heap
if sys.argv[1] == "keep":
    assert heap.keep_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 4 << 20
def one_round():
    blocks = [libc.malloc(size) for _ in range(40)]
    for b in blocks:
        ctypes.memset(b, 1, size)
    for b in blocks:
        libc.free(b)
one_round(); one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    one_round()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(heap._glibc() is None, reason="glibc's malloc only")
def test_freed_blocks_are_reused_without_page_faults() -> None:
    """By default glibc hands the 160 MiB freed at the end of each round back to the kernel
    (its trim threshold follows the 4-MiB blocks to 8 MiB) and faults every page in again:
    3 × 40960 pages. Kept, the later rounds reuse them."""
    default, kept = _faults("default"), _faults("keep")
    assert default > 3 * 40 * 1024 * 0.9, default
    assert kept < default / 20, (kept, default)


def test_the_fairseq_entry_keeps_freed_memory_before_it_runs(monkeypatch) -> None:
    import fairseq_cli.generate

    from localnmt.runs import fairseq_entry

    order: list[str] = []
    monkeypatch.setattr(heap, "keep_freed_memory", lambda: order.append("heap") or True)
    monkeypatch.setattr(fairseq_cli.generate, "cli_main", lambda: order.append("generate"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    fairseq_entry.run("generate", ["data-bin", "--path", "x.pt"])
    assert order == ["heap", "generate"]
