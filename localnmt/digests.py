"""Content digests of the files a step reads, cheap to take again.

A step's fingerprint (:mod:`localnmt.steps`) covers the bytes of its inputs: the data-bin's
dictionaries and binarised files, the raw references, the checkpoint it translates. Hashing
a large file at every rerun would cost seconds, so each folder keeps a manifest,
``.localnmt_digests.json``, of ``name -> sha256`` with the file's size, modification and
change times and inode when it was hashed; a file is hashed again only when one of those
differs (rewritten, copied, touched). The change time cannot be set back by a user, so a
rewritten file with its old modification time is still seen. Where the manifest cannot be
written (a read-only folder) the digest is taken each time.

Data preparation writes the manifest of the data-bin it builds (:func:`record_tree`), so the
first training does not pay for it either.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from localnmt.atomic import write_json

MANIFEST = ".localnmt_digests.json"
_CHUNK = 1 << 20

#: the files of a fairseq data-bin that decide what a model learns
DATA_BIN_PATTERNS = ("dict.*.txt", "*.bin", "*.idx")


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _read_manifest(folder: Path) -> dict:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def file_digests(paths: Iterable[Path]) -> dict[str, str]:
    """``name -> sha256`` of files of one folder, from its manifest where the file is
    unchanged; the manifest is brought up to date."""
    paths = [Path(p) for p in paths]
    if not paths:
        return {}
    folder = paths[0].parent
    manifest = _read_manifest(folder)
    out: dict[str, str] = {}
    changed = False
    for path in paths:
        stamp = _stamp(path.stat())
        entry = manifest.get(path.name)
        if isinstance(entry, dict) and entry.get("stamp") == stamp:
            out[path.name] = entry["sha256"]
            continue
        out[path.name] = sha256_file(path)
        manifest[path.name] = {"stamp": stamp, "sha256": out[path.name]}
        changed = True
    if changed:
        try:
            write_json(folder / MANIFEST, manifest)
        except OSError:
            pass  # a read-only folder: hash again next time
    return out


def file_digest(path: Path) -> str:
    """The sha256 of one file (see :func:`file_digests`)."""
    path = Path(path)
    return file_digests([path])[path.name]


def tree_files(folder: Path, patterns: Iterable[str] = DATA_BIN_PATTERNS) -> list[Path]:
    """The files under ``folder`` (sub-folders too) matching ``patterns``, sorted."""
    found = {p for pattern in patterns for p in Path(folder).rglob(pattern) if p.is_file()}
    return sorted(p for p in found if not p.name.startswith("."))


def tree_digest(folder: Path, patterns: Iterable[str] = DATA_BIN_PATTERNS) -> str:
    """One digest of the relative names and contents of the files under ``folder`` that
    match ``patterns`` (by default a data-bin's dictionaries and binarised files)."""
    folder = Path(folder)
    by_folder: dict[Path, list[Path]] = {}
    for path in tree_files(folder, patterns):
        by_folder.setdefault(path.parent, []).append(path)
    items = []
    for parent, paths in by_folder.items():
        rel = parent.relative_to(folder).as_posix()
        items += [(f"{rel}/{name}", sha) for name, sha in file_digests(paths).items()]
    blob = json.dumps(sorted(items)).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def record_tree(folder: Path, patterns: Iterable[str] = DATA_BIN_PATTERNS) -> None:
    """Write (or bring up to date) the manifest of a folder just built."""
    tree_digest(folder, patterns)


def content_digest(path: Path | None) -> str | None:
    """What a fingerprint records of an input: the digest of a file, of a data-bin's
    dictionaries and binarised files, or of every file of another folder (references);
    None for a missing path or None."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        is_data_bin = any(path.glob("dict*.txt")) or any(path.rglob("*.idx"))
        return tree_digest(path, DATA_BIN_PATTERNS if is_data_bin else ("*",))
    if path.is_file():
        return file_digest(path)
    return None
