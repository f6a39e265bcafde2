"""A data-bin checked before training: every split's ``.idx`` and ``.bin`` present and of one
piece, token ids inside the dictionaries, dictionaries that parse.

fairseq reads a data-bin lazily: a ``.bin`` cut short fails only when a batch reaches the
missing sentences (hours into a run on a big corpus), a missing ``.idx`` or a malformed
``dict.*.txt`` ends in a traceback. :func:`check_data_bin_files` reads what fairseq would, with
fairseq's own readers (:mod:`fairseq.data.indexed_dataset`, ``Dictionary.load``), and stops in
one line naming the file and what to do. It reads each index and scans each ``.bin`` once with
numpy (about a second per 100M tokens).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from localnmt.errors import UsageError

#: ``train.en-de.en.bin`` -> split ``train``, pair ``en-de``, language ``en``
_SPLIT_FILE = re.compile(r"^(?P<split>[^.]+)\.(?P<pair>[^.]+-[^.]+)\.(?P<lang>[^.]+)\.(?:bin|idx)$")
REBUILD = "binarise the corpus again (the data_prep/ script that made it, or fairseq-preprocess)"


@dataclass(frozen=True)
class DataBinSummary:
    """What the check learnt: the longest sentence of the training split, per language."""

    longest: dict[str, int]


def _dictionary_size(path: Path) -> int:
    from fairseq.data import Dictionary

    try:
        return len(Dictionary.load(str(path)))
    except (ValueError, RuntimeError, UnicodeDecodeError, OSError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise UsageError(f"{path}: not a fairseq dictionary ({reason}); {REBUILD}") from None


def _split_lengths(prefix: Path, vocab: int | None) -> np.ndarray:
    """The sentence lengths of one ``.idx``/``.bin`` pair, after checking that the ``.bin``
    holds exactly what the index says and only ids of the dictionary (``vocab`` entries)."""
    from fairseq.data import indexed_dataset as ix

    idx, bin_ = prefix.with_name(prefix.name + ".idx"), prefix.with_name(prefix.name + ".bin")
    for path, other in ((idx, bin_), (bin_, idx)):
        if not path.is_file():
            raise UsageError(f"{path} is missing (its {other.name} is there); {REBUILD}")
    impl = ix.infer_dataset_impl(str(prefix))
    try:
        if impl == "mmap":
            index = ix.MMapIndexedDataset.Index(str(idx))
            sizes, dtype = np.array(index.sizes, dtype=np.int64), np.dtype(index.dtype)
            last = index[len(index) - 1] if len(index) else (0, 0)  # (pointer, size)
            expected = int(last[0]) + int(last[1]) * dtype.itemsize
        elif impl == "cached":
            data = ix.IndexedDataset(str(prefix))
            sizes, dtype = np.array(data.sizes, dtype=np.int64), np.dtype(data.dtype)
            expected = int(data.data_offsets[-1]) * data.element_size
        else:
            raise UsageError(f"{idx}: not a fairseq index file; {REBUILD}")
    except (AssertionError, ValueError, KeyError, struct.error) as err:
        raise UsageError(f"{idx}: damaged index ({err or 'cut short'}); {REBUILD}") from None
    actual = bin_.stat().st_size
    if actual != expected:
        cut = "cut short" if actual < expected else "longer than its index says"
        raise UsageError(f"{bin_}: {actual} bytes where its index {idx.name} says {expected} "
                         f"({cut}); {REBUILD}")  # fmt: skip
    if vocab is not None and actual:
        top = int(np.memmap(bin_, dtype=dtype, mode="r").max())
        if top >= vocab:
            raise UsageError(f"{bin_}: token id {top} but its dictionary has {vocab} entries "
                             f"(a data-bin mixed from two runs?); {REBUILD}")  # fmt: skip
    return sizes


def check_data_bin_files(
    data: str | Path, splits: tuple[str, ...] = ("train", "valid")
) -> DataBinSummary:
    """Check the data-bin ``data`` (see the module docstring): every ``dict.*.txt``, every
    ``SPLIT.PAIR.LANG`` of ``splits`` for each language pair the directory holds, and any
    other split found there. Raises :class:`UsageError` with one line."""
    path = Path(data)
    vocab = {d.name[len("dict."):-len(".txt")]: _dictionary_size(d)
             for d in sorted(path.glob("dict.*.txt"))}  # fmt: skip
    found: dict[tuple[str, str, str], None] = {}
    for file in sorted(path.iterdir()):
        if m := _SPLIT_FILE.match(file.name):
            found[(m["split"], m["pair"], m["lang"])] = None
    prefixes = set(found)
    for _, pair, lang in list(found):
        prefixes.update((split, pair, lang) for split in splits)
    longest: dict[str, int] = {}
    for split, pair, lang in sorted(prefixes):
        prefix = path / f"{split}.{pair}.{lang}"
        if not any(prefix.with_name(prefix.name + s).is_file() for s in (".idx", ".bin")):
            raise UsageError(f"{path} has no {split} split for {pair} ({prefix.name}.idx and "
                             f".bin); {REBUILD}")  # fmt: skip
        sizes = _split_lengths(prefix, vocab.get(lang))
        if split == "train" and len(sizes):
            longest[lang] = max(longest.get(lang, 0), int(sizes.max()))
    return DataBinSummary(longest)
