"""Weights-only checkpoint loading: the one allow-list of what a checkpoint's pickle may name.

Every checkpoint the package reads goes through ``torch.load(weights_only=True)``: tensors,
numbers, strings and containers, plus the globals of :func:`safe_globals`, which are what real
fairseq checkpoints hold (``argparse.Namespace`` of argparse-era configs; omegaconf's
``DictConfig`` and its node types in hydra-era ones; numpy arrays that ``--eval-bleu``
validation keeps in the metrics). A pickle that names anything else (``os.system``, say) is
refused before it runs anything. Importing :mod:`localnmt` registers the list with torch, so
fairseq's own loads (training resume, generation) use it too. A torch older than 2.4 has no
such list: there the same list is enforced by an unpickler of ours given to ``torch.load``
(:class:`_AllowListUnpickler`), so real checkpoints load on every torch ``setup.py`` admits.
"""

from __future__ import annotations

import _compat_pickle
import argparse
import codecs
import collections
import functools
import pickle
import re
import types
import typing
import warnings
import zipfile
from pathlib import Path
from typing import Any, NoReturn

import torch

from localnmt.errors import CheckpointError

__all__ = ["CheckpointError", "load_checkpoint", "safe_globals"]


def _numpy_globals() -> list[Any]:
    """numpy arrays of plain numeric dtypes (what fairseq's metrics keep), and scalars."""
    import numpy as np

    numpy2 = int(np.__version__.split(".")[0]) >= 2  # numpy 1.26 has a _core without them
    core = np._core if numpy2 else np.core
    found: list[Any] = [np.ndarray, np.dtype, core.multiarray._reconstruct,
                        core.multiarray.scalar]  # fmt: skip
    codes = "?bBhHiIlLqQefdgFDG"  # bool, integers, floats, complex: no object dtype
    found += sorted({type(np.dtype(code)) for code in codes}, key=lambda t: t.__name__)
    return found


def _omegaconf_globals() -> list[Any]:
    """omegaconf containers and nodes of hydra-era fairseq configs (none if not installed)."""
    try:
        from omegaconf import DictConfig, ListConfig, nodes
        from omegaconf.base import ContainerMetadata, Metadata
    except ImportError:
        return []
    node_types = [nodes.AnyNode, nodes.StringNode, nodes.IntegerNode, nodes.FloatNode,
                  nodes.BooleanNode, nodes.EnumNode]  # fmt: skip
    return [DictConfig, ListConfig, ContainerMetadata, Metadata, *node_types]


def _fairseq_globals() -> list[Any]:
    """The placeholder fairseq's state broadcast puts where tensors were (a resume with
    several processes: rank 0 loads the checkpoint and sends it to the others, who unpickle
    it weights-only on torch >= 2.6)."""
    try:
        from fairseq.distributed.utils import _TensorPlaceholder
    except ImportError:
        return []
    return [_TensorPlaceholder]


def safe_globals() -> list[Any]:
    """Everything besides tensors and plain containers that a checkpoint may hold."""
    plain_types = [dict, list, tuple, set, int, float, str, bool]
    return [
        argparse.Namespace,
        collections.defaultdict,
        collections.OrderedDict,
        typing.Any,
        *plain_types,
        *_omegaconf_globals(),
        *_numpy_globals(),
        *_fairseq_globals(),
    ]


def allow_checkpoint_globals() -> bool:
    """Register :func:`safe_globals` with torch, for weights-only loads done by fairseq; False
    where this torch has no allow-list (before 2.4, whose ``torch.load`` needs none)."""
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is None:
        return False
    add(safe_globals())
    return True


class _Refused(pickle.UnpicklingError):
    """A global that :class:`_AllowListUnpickler` does not resolve."""


class _AllowListUnpickler(pickle.Unpickler):
    """An unpickler that resolves only torch's weights-only globals and :func:`safe_globals`:
    weights-only loading on a torch without an allow-list (before 2.4, which has
    ``weights_only=True`` but no way to add ``argparse.Namespace`` to it)."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = _allowed_by_name()
        # Python 2 names (protocol 2 pickles), as pickle's own find_class maps them
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        key = f"{module}.{name}"
        if key not in allowed:
            raise _Refused(f"Unsupported global: GLOBAL {key}")
        return allowed[key]


@functools.cache
def _allowed_by_name() -> dict[str, Any]:
    """``module.name`` of everything :class:`_AllowListUnpickler` resolves."""
    from torch import _weights_only_unpickler

    allowed = dict(_weights_only_unpickler._get_allowed_globals())
    allowed["_codecs.encode"] = codecs.encode  # bytes in protocol 2 pickles (numpy arrays)
    for obj in safe_globals():
        allowed[f"{obj.__module__}.{getattr(obj, '__qualname__', obj.__name__)}"] = obj
    return allowed


#: ``torch.load``'s ``pickle_module`` for :class:`_AllowListUnpickler` (torch's zip and legacy
#: readers use its ``Unpickler`` and ``load``).
_ALLOW_LIST_PICKLE = types.SimpleNamespace(
    __name__="localnmt_allow_list_pickle",
    Unpickler=_AllowListUnpickler,
    load=lambda file, **kwargs: _AllowListUnpickler(file, **kwargs).load(),
)


def _torch_load(path: Path, mmap: bool) -> Any:
    """``torch.load`` weights only: torch's own where it takes :func:`safe_globals` (2.4 and
    newer), else torch's reader with :class:`_AllowListUnpickler`."""
    if allow_checkpoint_globals():  # not torch's safe_globals(): leaving it removes them for all
        return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap)
    return torch.load(str(path), map_location="cpu", weights_only=False, mmap=mmap,
                      pickle_module=_ALLOW_LIST_PICKLE)  # fmt: skip


_GLOBAL = re.compile(r"GLOBAL (\S+)")
_UNPICKLER = re.compile(r"WeightsUnpickler error:\s*(.+?)(?:\n|$)")


def _refusal(path: Path, err: pickle.UnpicklingError) -> CheckpointError:
    """The one-line message for a pickle that asks for more than tensors and configs."""
    text = str(err)
    if match := _GLOBAL.search(text):
        what = f"its pickle asks for {match.group(1)}"
    elif match := _UNPICKLER.search(text):
        what = f"its pickle does what no checkpoint does ({match.group(1).strip()})"
    else:
        what = "its pickle holds an object of an unknown kind"
    return CheckpointError(
        f"{path}: refused to load: {what}; a checkpoint holds only tensors, numbers and "
        "configuration (localnmt.safe_load lists what is allowed) and nothing in this file was "
        "run. Use checkpoints from sources you trust, or re-save this one with the code that "
        "wrote it"
    )


def load_checkpoint(path: Path, *, mmap: bool = False) -> dict:
    """``torch.load`` of ``path`` to the CPU, weights only; a missing, damaged or refused file
    is a :class:`CheckpointError` naming it. ``mmap``: map the tensors instead of reading them
    (quick, for checks; zip-format checkpoints only, others are read)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    mmap = mmap and zipfile.is_zipfile(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. torch's note on a pickle protocol
            state = _torch_load(path, mmap)
    except pickle.UnpicklingError as err:
        # torch's weights-only reader: any; ours (torch < 2.4): a global it refused
        if isinstance(err, _Refused) or hasattr(torch.serialization, "add_safe_globals"):
            raise _refusal(path, err) from None
        _damaged(path, err)
    except Exception as err:  # truncated (EOFError, zip error), not a torch file (KeyError), ...
        _damaged(path, err)
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a fairseq checkpoint (holds a {type(state).__name__})")
    return state


def _damaged(path: Path, err: Exception) -> NoReturn:
    """Raise the one-line :class:`CheckpointError` of a file that is no (whole) checkpoint."""
    reason = str(err).split(". ")[0].strip()
    if isinstance(err, EOFError) or path.stat().st_size == 0:
        reason = "the file is empty or cut short"
    elif not re.search("[a-z]{3}", reason):  # e.g. KeyError(101) of a text file
        reason = "not a file torch.save wrote"
    raise CheckpointError(
        f"{path}: damaged or not a checkpoint ({reason}); use another checkpoint of the run"
    ) from None
