"""What evaluation checks before decoding anything: the checkpoint loads (weights only), it
was trained with the data-bin's dictionaries (their digests, their sizes), every
test sentence fits the model's positions, and each given file has one line per test sentence.
Each problem is a :class:`~localnmt.errors.DataError` of one line that names the file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from localnmt.data.max_positions import DEFAULT_MAX_POSITIONS, first_too_long, too_long_message
from localnmt.errors import DataError
from localnmt.provenance import check_data_bin, check_trained
from localnmt.runs.model_fit import check_vocabulary
from localnmt.safe_load import load_checkpoint

#: A given file: (option, path, its lines), e.g. ``("--ref", Path("ref.de"), [...])``.
Given = tuple[str, Path, Sequence[str]]


def check_line_counts(expected: int, expected_what: str, given: Sequence[Given]) -> None:
    """Every given file has ``expected`` lines, and there is something to score."""
    if expected == 0:
        raise DataError(f"{expected_what} is empty: nothing to score")
    for option, path, lines in given:
        if len(lines) != expected:
            raise DataError(
                f"{option} {path} has {len(lines)} lines, but {expected_what} has {expected}; "
                "give the file that belongs to this test set"
            )


def _value(config: Any, key: str) -> Any:
    """``config[key]`` or ``config.key`` of a dict, DictConfig or Namespace (None if absent)."""
    if isinstance(config, Mapping):  # a dict, or omegaconf's DictConfig
        return config.get(key)
    return getattr(config, key, None)


def model_positions(state: dict) -> tuple[int | None, int | None]:
    """The source and target positions a fairseq checkpoint's model was built with."""
    configs = [state.get("args"), _value(state.get("cfg"), "model")]
    found = []
    for key in ("max_source_positions", "max_target_positions"):
        values = [int(v) for c in configs if (v := _value(c, key)) is not None]
        found.append(min(values) if values else None)
    return found[0], found[1]


def _option(extra: Sequence[str], name: str) -> int | None:
    """The integer value of ``name VALUE`` / ``name=VALUE`` among fairseq-generate's options."""
    for i, arg in enumerate(extra):
        if arg == name and i + 1 < len(extra):
            return int(extra[i + 1])
        if arg.startswith(name + "="):
            return int(arg.split("=", 1)[1])
    return None


def subset_sizes(data_bin: Path, subset: str, src: str, tgt: str, lang: str) -> np.ndarray | None:
    """Token counts (with end of sentence) of one side of a binarised subset, or None."""
    from fairseq.data import data_utils

    prefix = Path(data_bin) / f"{subset}.{src}-{tgt}.{lang}"
    dataset = data_utils.load_indexed_dataset(str(prefix))
    # a copy: the sizes are a view of the dataset's memory map, closed when it is freed
    return None if dataset is None else np.array(dataset.sizes)


def check_fits_model(
    data_bin: Path, subset: str, src: str, tgt: str, checkpoint: Path,
    extra: Sequence[str] = (),
) -> None:  # fmt: skip
    """The checkpoint loads and was trained with the data-bin's dictionaries
    (:mod:`localnmt.provenance`, :mod:`localnmt.runs.model_fit`), and no sentence of the
    subset is longer than the positions fairseq-generate will allow (the model's, and the
    task's: 1024 unless ``extra`` sets ``--max-source-positions`` /
    ``--max-target-positions``)."""
    state = load_checkpoint(checkpoint, mmap=True)  # quick: the tensors are not read
    check_vocabulary(Path(checkpoint), state, Path(data_bin), src, tgt)
    check_data_bin(Path(checkpoint), state, Path(data_bin))  # another run's dictionaries?
    check_trained(Path(checkpoint), state)  # methods added by convert_checkpoint, untrained?
    model_limits = model_positions(state)
    del state
    sides = (("source", src, "--max-source-positions"), ("target", tgt, "--max-target-positions"))
    for (side, lang, option), model_limit in zip(sides, model_limits):
        task_limit = _option(extra, option) or DEFAULT_MAX_POSITIONS
        limit = min(task_limit, model_limit) if model_limit else task_limit
        sizes = subset_sizes(data_bin, subset, src, tgt, lang)
        if sizes is not None and (found := first_too_long(sizes, limit)):
            index, tokens = found
            where = str(Path(data_bin) / f"{subset}.{src}-{tgt}.{lang}")
            raise DataError(too_long_message(where, index + 1, tokens, limit, side))
