"""Plots are written without a display and without matplotlib's debug log."""

from __future__ import annotations

import logging

from localnmt.plotting import pyplot


def test_pyplot_is_agg_and_quiet(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # as after ``import fairseq``
    plt = pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0], label="x")
    ax.legend()
    fig.savefig(tmp_path / "p.png")
    plt.close(fig)
    assert plt.get_backend().lower() == "agg"
    assert (tmp_path / "p.png").stat().st_size > 0
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")]
