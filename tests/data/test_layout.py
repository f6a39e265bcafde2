"""localnmt/data/corpus_layout.py: where a prepared corpus keeps its files."""

from __future__ import annotations

import pytest

from localnmt.data.corpus_layout import count_lines
from localnmt.errors import DataError


def test_count_lines_of_a_missing_subset_names_it(tmp_path) -> None:
    """fairseq returns None for a missing subset: one DataError naming the files."""
    with pytest.raises(DataError, match=r"no binarised subset .*valid\.en-de\.en\.idx/\.bin"):
        count_lines(tmp_path, "valid", "en", "de")
