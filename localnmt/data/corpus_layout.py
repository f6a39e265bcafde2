"""Where a prepared corpus keeps its files: ``<workdir>/data-bin`` and ``<workdir>/raw``.

Every data-preparation pipeline writes the fairseq data-bin and, beside it, the raw (untokenised)
text of each subset under the data-bin's subset name (``train``, ``valid``, ``test``, ``test1``,
...), so that scoring always compares detokenised output against the real references.
"""

from __future__ import annotations

from pathlib import Path


def raw_dir(data_bin: Path) -> Path:
    """The folder of raw text that belongs to ``data_bin`` (its sibling ``raw/``)."""
    return Path(data_bin).resolve().parent / "raw"


def raw_file(data_bin: Path, subset: str, lang: str) -> Path:
    """Raw text of one subset and language, e.g. ``raw/test1.de`` for subset ``test1``."""
    return raw_dir(data_bin) / f"{subset}.{lang}"


def count_lines(data_bin: Path, subset: str, src: str, tgt: str) -> int:
    """Number of sentences of a binarised subset (from the source side's ``.idx`` header)."""
    from fairseq.data import data_utils

    prefix = Path(data_bin) / f"{subset}.{src}-{tgt}.{src}"
    dataset = data_utils.load_indexed_dataset(str(prefix))
    if dataset is None:  # fairseq returns None for a missing subset
        from localnmt.errors import DataError

        raise DataError(f"no binarised subset {prefix}.idx/.bin: prepare the data-bin again")
    return len(dataset)
