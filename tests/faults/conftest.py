"""Fixtures of the fault tests: a marker for crafted checkpoints, a model with few positions
(the faults themselves: :mod:`localnmt.fault_injection`)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Where a crafted checkpoint's payload would leave its trace."""
    return tmp_path / "MARKER"


@pytest.fixture(scope="session")
def few_positions_model(tiny_data, tmp_path_factory) -> Path:
    """A tiny model trained with 10 source and target positions: some sentences of the tiny
    test set (up to 15 tokens) are longer than that."""
    from localnmt import testing

    save_dir = tmp_path_factory.mktemp("few_positions")
    extra = ["--max-source-positions", "10", "--max-target-positions", "10"]
    return testing.train(tiny_data, save_dir, "localnmt_base", extra, max_update=2).checkpoint
