"""The C extensions report the sources they were built from; stale builds are not used."""

from __future__ import annotations

import importlib
import logging
import shutil

import pytest

from localnmt import cbuild
from localnmt.attention.fast.native import EXTENSIONS


def built(name: str):
    try:
        return importlib.import_module(f"localnmt.{name}")
    except ImportError:
        pytest.skip(f"localnmt.{name} was not built (no C compiler)")


@pytest.mark.parametrize("name,source", EXTENSIONS)
def test_each_build_is_of_the_sources_beside_it(name, source):
    """Fails after a C source changed without a rebuild (and the kernels' tests would then
    have run the torch ops): rebuild with ``pip install -e .``."""
    assert built(name).source_digest() == cbuild.source_digest(source)
    assert cbuild.load_extension(name, source) is built(name)


def test_a_changed_source_or_header_changes_the_digest(tmp_path):
    csrc = tmp_path / "csrc"
    shutil.copytree(cbuild.CSRC, csrc)
    first = cbuild.source_digest("band.c", csrc)
    assert first == cbuild.source_digest("band.c", csrc)
    (csrc / "builds.h").write_text((csrc / "builds.h").read_text() + "\n")
    second = cbuild.source_digest("band.c", csrc)
    (csrc / "band.c").write_text((csrc / "band.c").read_text() + "\n")
    assert len({first, second, cbuild.source_digest("band.c", csrc)}) == 3
    assert cbuild.source_digest("gmm_step.c", csrc) != cbuild.source_digest("band.c", csrc)


def test_a_stale_build_is_not_used_and_the_warning_says_how_to_rebuild(tmp_path, caplog):
    module = built("_band")
    csrc = tmp_path / "csrc"
    shutil.copytree(cbuild.CSRC, csrc)
    (csrc / "band.c").write_text((csrc / "band.c").read_text() + "/* edited */\n")
    with caplog.at_level(logging.WARNING, logger="localnmt.cbuild"):
        assert cbuild.load_extension("_band", "band.c", csrc) is None
    assert "localnmt._band" in caplog.text and cbuild.REBUILD in caplog.text
    caplog.clear()
    # without sources beside the package (an installed wheel) the build is trusted
    assert cbuild.load_extension("_band", "band.c", tmp_path / "absent") is module
    assert not caplog.text


def test_an_extension_that_was_not_built_is_none_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert cbuild.load_extension("_no_such_extension", "band.c") is None
    assert not caplog.text
