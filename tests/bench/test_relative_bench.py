"""bench.relative_attention: one tiny run prints a ratio and both times per shape."""

from __future__ import annotations

import re

import pytest

from bench import relative_attention
from localnmt.attention.fast.native import c_relative


@pytest.mark.skipif(not c_relative.ENABLED, reason="localnmt._relative was not built")
def test_a_tiny_run_prints_a_ratio_per_shape(capsys):
    relative_attention.main(["--shapes", "2x2x5x8", "3x1x7x4", "--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    rows = [re.match(r"B=(\d+) H=(\d+) T=(\d+) d=(\d+): ([\d.]+)  \(C ([\d.]+) ms, dense "
                     r"([\d.]+) ms\)$", line) for line in lines]  # fmt: skip
    found = [m.groups()[:4] for m in rows if m]
    assert found == [("2", "2", "5", "8"), ("3", "1", "7", "4")]
    assert all(float(m[5]) > 0 for m in rows if m)
