"""Content digests of the files a step reads, cheap to take again.

A step's fingerprint (:mod:`localnmt.steps`) covers the bytes of its inputs: the raw corpus,
the data-bin's dictionaries and binarised files, the raw references, the checkpoint it
translates. Hashing a large file at every rerun would cost seconds, so a cache (a JSON file
the step runner keeps in its own folder, never beside the inputs) remembers each file's
sha256 with its size, modification and change times and inode when it was hashed; a file is
hashed again only when one of those differs (rewritten, copied, touched). The change time
cannot be set back by a user, so a rewritten file with its old modification time is still
seen. Without a cache (or where it cannot be written) the digest is taken each time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from localnmt.atomic import write_json

_CHUNK = 1 << 20

#: the files of a fairseq data-bin that decide what a model learns
DATA_BIN_PATTERNS = ("dict.*.txt", "*.bin", "*.idx")


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _read_cache(cache: Path | None) -> dict:
    if cache is None:
        return {}
    try:
        data = json.loads(Path(cache).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def sha256_file(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes (sha256 unless ``algorithm`` says otherwise), read
    in 1 MiB chunks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digests(paths: Iterable[Path], cache: Path | None = None) -> dict[str, str]:
    """``absolute path -> sha256`` of files, from ``cache`` where a file is unchanged; the
    cache is brought up to date."""
    known = _read_cache(cache)
    out: dict[str, str] = {}
    changed = False
    for path in paths:
        key = str(Path(path).resolve())
        stamp = _stamp(Path(path).stat())
        entry = known.get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            out[key] = entry["sha256"]
            continue
        out[key] = sha256_file(Path(path))
        known[key] = {"stamp": stamp, "sha256": out[key]}
        changed = True
    if changed and cache is not None:
        try:
            write_json(Path(cache), known)
        except OSError:
            pass  # a read-only folder: hash again next time
    return out


def file_digest(path: Path, cache: Path | None = None) -> str:
    """The sha256 of one file (see :func:`file_digests`)."""
    return next(iter(file_digests([path], cache).values()))


def tree_files(folder: Path, patterns: Iterable[str] = DATA_BIN_PATTERNS) -> list[Path]:
    """The files under ``folder`` (sub-folders too) matching ``patterns``, sorted."""
    found = {p for pattern in patterns for p in Path(folder).rglob(pattern) if p.is_file()}
    return sorted(p for p in found if not p.name.startswith("."))


def tree_digest(
    folder: Path, patterns: Iterable[str] = DATA_BIN_PATTERNS, cache: Path | None = None
) -> str:
    """One digest of the relative names and contents of the files under ``folder`` that
    match ``patterns`` (by default a data-bin's dictionaries and binarised files)."""
    folder = Path(folder).resolve()
    files = tree_files(folder, patterns)
    digests = file_digests(files, cache)
    items = sorted((p.relative_to(folder).as_posix(), digests[str(p)]) for p in files)
    return hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


def content_digest(path: Path | None, cache: Path | None = None) -> str | None:
    """What a fingerprint records of an input: the digest of a file, of a data-bin's
    dictionaries and binarised files, or of every file of another folder (references);
    None for a missing path or None."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        is_data_bin = any(path.glob("dict*.txt")) or any(path.rglob("*.idx"))
        return tree_digest(path, DATA_BIN_PATTERNS if is_data_bin else ("*",), cache)
    if path.is_file():
        return file_digest(path, cache)
    return None
