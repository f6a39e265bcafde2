"""Where a checkpoint came from: the digests of the dictionaries (and subword models) it was
trained with, and how far it was trained.

The training entry point stamps every checkpoint fairseq writes with :data:`KEY`: the sha256
of each ``dict.*.txt`` of the data-bin and of the subword model(s) its ``localnmt_data.json``
names (BPE codes, sentencepiece model), and the data-bin's path (for messages only). Every
command that runs a checkpoint against a data-bin (translate, evaluate, resume, averaging)
calls :func:`check_data_bin`: a dictionary with the same name and other contents (the same
words in another order, say, which gives a model of the same shape and garbage output) is
refused in one line naming both files. A checkpoint written before stamps existed carries no
digests: it is used, after a one-line note.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from localnmt.digests import sha256_file
from localnmt.errors import CheckpointError

#: the key of a checkpoint's provenance (fairseq ignores keys it does not know)
KEY = "localnmt_provenance"
#: how many hex digits of a digest a message shows
SHOWN = 12

Note = Callable[[str], None]


class ProvenanceError(CheckpointError):
    """A checkpoint used with files of another run (its dictionaries, its subword model)."""


def note_to_stderr(message: str) -> None:
    """The default way a note reaches the user: one line on stderr."""
    print(message, file=sys.stderr, flush=True)


def value(config: Any, key: str) -> Any:
    """``config[key]`` or ``config.key`` of a dict, DictConfig or Namespace (None if absent)."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return config.get(key)
    return getattr(config, key, None)


def section(state: Mapping, name: str) -> Any:
    """``cfg.<name>`` of a hydra-era checkpoint, else its argparse-era ``args``."""
    found = value(state.get("cfg"), name)
    return found if found is not None else state.get("args")


def data_bin_of(state: Mapping) -> Path | None:
    """The data-bin a checkpoint was trained on (the first of fairseq's ``a:b`` shards)."""
    data = value(section(state, "task"), "data")
    return Path(str(data).split(":")[0]) if data else None


def data_bin_files(data_bin: Path) -> dict[str, dict[str, Path]]:
    """The files of a data-bin a model depends on: ``dictionaries`` (``dict.*.txt``) and
    ``subword_models`` (those ``localnmt_data.json`` names; none for other data-bins), by
    file name."""
    data_bin = Path(data_bin)
    dicts = {p.name: p for p in sorted(data_bin.glob("dict.*.txt")) if p.is_file()}
    models: dict[str, Path] = {}
    from localnmt.data.metadata import FILENAME, read_metadata

    if (data_bin / FILENAME).is_file():
        try:
            info = read_metadata(data_bin)
        except (ValueError, KeyError, TypeError, OSError, CheckpointError):
            info = None
        for path in info.bpe_model.values() if info else ():
            if path.is_file():
                models[path.name] = path
    return {"dictionaries": dicts, "subword_models": models}


def digests_of(data_bin: Path) -> dict[str, Any]:
    """The provenance a checkpoint trained on ``data_bin`` carries."""
    files = data_bin_files(data_bin)
    return {
        "data_bin": str(Path(data_bin).resolve()),
        **{kind: {name: sha256_file(p) for name, p in found.items()}
           for kind, found in files.items()},
    }  # fmt: skip


def stamp(state: Any) -> Any:
    """Add :data:`KEY` to a training state fairseq is about to save (its data-bin's
    digests); anything else, or a state whose data-bin is gone, is left as it is."""
    if not isinstance(state, dict) or "model" not in state or KEY in state:
        return state
    data_bin = data_bin_of(state)
    if data_bin is not None and data_bin.is_dir():
        state[KEY] = digests_of(data_bin)
    return state


def recorded(state: Mapping) -> dict | None:
    """The provenance a checkpoint carries, or None (written before stamps existed)."""
    found = state.get(KEY)
    return found if isinstance(found, dict) else None


def _short(digest: str) -> str:
    return digest[:SHOWN]


def check_data_bin(
    checkpoint: Path,
    state: Mapping,
    data_bin: Path,
    *,
    subword: bool = False,
    note: Note | None = note_to_stderr,
) -> None:
    """Refuse (:class:`ProvenanceError`, one line naming both files) a data-bin whose
    dictionaries (and, with ``subword``, subword models) are not those ``checkpoint`` was
    trained with; a checkpoint without digests gets a one-line ``note`` instead."""
    held = recorded(state)
    if held is None:
        if note is not None:
            note(f"note: {checkpoint} records no digests of its dictionaries (written before "
                 f"checkpoints did): {data_bin}'s are not checked against it")  # fmt: skip
        return
    files = data_bin_files(data_bin)
    kinds = ["dictionaries", "subword_models"] if subword else ["dictionaries"]
    origin = held.get("data_bin") or "its data-bin"
    for kind in kinds:
        for name, digest in (held.get(kind) or {}).items():
            path = files[kind].get(name)
            what = "dictionary" if kind == "dictionaries" else "subword model"
            if path is None:
                if kind == "dictionaries":
                    raise ProvenanceError(
                        f"{checkpoint} was trained with the {what} {Path(origin) / name}, but "
                        f"{data_bin} has no {name}: give the data-bin it was trained on"
                    )
                continue
            found = sha256_file(path)
            if found != digest:
                raise ProvenanceError(
                    f"{checkpoint} was trained with the {what} {Path(origin) / name} (sha256 "
                    f"{_short(digest)}), not with {path} (sha256 {_short(found)}): another "
                    "run's file maps tokens to other words; give the data-bin it was trained on"
                )


#: what ``python -m localnmt.convert_checkpoint`` records in the checkpoint it writes
CONVERSION_KEY = "localnmt_conversion"


def untrained_methods(state: Mapping) -> list[str]:
    """The method parameters ``convert_checkpoint`` added at their initialisation to this very
    checkpoint (fairseq does not copy the record into the checkpoints a fine-tune writes)."""
    found = state.get(CONVERSION_KEY)
    return list(found.get("initialised") or []) if isinstance(found, Mapping) else []


def check_trained(checkpoint: Path, state: Mapping, note: Note | None = note_to_stderr) -> None:
    """A one-line ``note`` where ``checkpoint`` holds method parameters that were added by
    ``convert_checkpoint`` and never trained: its output is not a trained model's."""
    names = untrained_methods(state)
    if names and note is not None:
        note(f"note: {checkpoint}: {len(names)} method parameters were added at their "
             f"initialisation by convert_checkpoint and never trained (e.g. {names[0]}): its "
             "output is not that of a trained model of this configuration; fine-tune it first "
             "(fairseq-train --finetune-from-model)")  # fmt: skip


def same_origin(first: Path, first_state: Mapping, other: Path, other_state: Mapping) -> None:
    """Two checkpoints trained with the same dictionaries and subword models (those that
    record them); else a :class:`ProvenanceError` naming both."""
    a, b = recorded(first_state), recorded(other_state)
    if a is None or b is None:
        return
    for kind in ("dictionaries", "subword_models"):
        mine, theirs = a.get(kind) or {}, b.get(kind) or {}
        for name in sorted(set(mine) & set(theirs)):
            if mine[name] != theirs[name]:
                raise ProvenanceError(
                    f"{other} was trained with another {name} (sha256 "
                    f"{_short(theirs[name])}) than {first} (sha256 {_short(mine[name])}): "
                    "they come from different runs"
                )


def updates(state: Mapping) -> int | None:
    """The updates a checkpoint was trained for (fairseq's ``optimizer_history``)."""
    history = state.get("optimizer_history")
    if isinstance(history, list) and history and isinstance(history[-1], Mapping):
        found = history[-1].get("num_updates")
        return int(found) if found is not None else None
    return None


def max_update(state: Mapping) -> int | None:
    """The ``--max-update`` of the run that wrote a checkpoint (None: not set)."""
    found = value(section(state, "optimization"), "max_update")
    return int(found) if found else None


def training_record(checkpoint: Path, state: Mapping, last: Mapping | None = None) -> dict:
    """What a score records of its checkpoint's training: ``updates``, the run's
    ``max_update`` and whether the run ``finished`` (reached ``max_update``, by this
    checkpoint or by ``last``, the ``checkpoint_last.pt`` beside it; None: not known)."""
    done, limit = updates(state), max_update(state)
    reached = [n for n in (done, updates(last) if last else None) if n is not None]
    finished = (max(reached) >= limit) if (limit and reached) else None
    return {"checkpoint": str(checkpoint), "updates": done, "max_update": limit,
            "finished": finished}  # fmt: skip


def describe_training(record: Mapping) -> str:
    """``95 of 2000 updates, unfinished`` (what a summary says of a checkpoint)."""
    done, limit = record.get("updates"), record.get("max_update")
    text = f"{done if done is not None else '?'} of {limit} updates" if limit else (
        f"{done} updates" if done is not None else "updates unknown")  # fmt: skip
    if record.get("finished") is False:
        text += ", UNFINISHED run"
    elif record.get("finished"):
        text += ", run finished"
    return text
