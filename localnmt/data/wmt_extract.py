"""Assemble ``raw/{train,valid,test...}.{src,tgt}`` from a local directory of WMT files.

A text is found either as a plain file (``<dir>/<member>``, its base name, or either with
``.gz``) or as a member of one of the downloaded archives in ``<dir>``. Nothing here touches
the network. Every text is validated (UTF-8, gzip integrity, aligned line counts) before it
is used.
"""

from __future__ import annotations

import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from localnmt.atomic import atomic_open, atomic_path, write_json
from localnmt.data.sgm import sgm_segments
from localnmt.data.validate import iter_lines_checked, validate_parallel
from localnmt.errors import DataError
from localnmt.steps import Log


@dataclass(frozen=True)
class Text:
    """One side of a corpus: an archive member (or plain file) path, SGML or plain."""

    member: str
    archive: str | None = None
    sgm: bool = False


@dataclass(frozen=True)
class Corpus:
    """A parallel corpus: name, the two sides, and whether it may be absent."""

    name: str
    sides: dict[str, Text]
    optional_hint: str | None = None  # set for manual downloads: what to do if missing


def _locate_plain(root: Path, member: str) -> Path | None:
    for cand in (root / member, root / Path(member).name):
        for p in (cand, cand.with_name(cand.name + ".gz")):
            if p.is_file():
                return p
    return None


def _extract_member(archive: Path, member: str, out: Path) -> None:
    try:
        with tarfile.open(archive, "r:*") as tf:
            try:
                info = tf.getmember(member)
            except KeyError:
                raise DataError(f"{archive}: has no member {member}") from None
            if info.issym() or info.islnk():  # never followed, inside the archive or out of it
                raise DataError(
                    f"{archive}: {member} is a link (to {info.linkname}), not a file; links in "
                    f"archives are not followed: download {archive.name} again, or put the "
                    f"file itself in {archive.parent}"
                )
            src = tf.extractfile(info)
            if src is None:
                raise DataError(f"{archive}: {member} is not a regular file")
            with atomic_path(out) as tmp, open(tmp, "wb") as f:
                shutil.copyfileobj(src, f, 1 << 20)
    except (EOFError, tarfile.ReadError, zlib.error, OSError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(
            f"{archive}: truncated or corrupt archive ({e}); download it again"
        ) from None


def materialise(text: Text, root: Path, cache: Path) -> Path | None:
    """Path of a plain (possibly .gz) file holding the text, extracting it if needed."""
    plain = _locate_plain(root, text.member)
    if plain is not None:
        return plain
    if text.archive and (root / text.archive).is_file():
        out = cache / text.member
        if not out.exists():
            _extract_member(root / text.archive, text.member, out)
        return out
    return None


def _write_side(src_file: Path, sgm: bool, f) -> int:
    lines = iter_lines_checked(src_file)
    n = 0
    for line in sgm_segments(lines) if sgm else lines:
        f.write(line + "\n")
        n += 1
    return n


def assemble(
    corpora: dict[str, list[Corpus]], root: Path, raw_dir: Path, langs: tuple[str, str], *,
    allow_missing_optional: bool = False, log: Log = print,
) -> dict:  # fmt: skip
    """Write each split (``train``, ``valid``, tests) as the concatenation of its corpora."""
    root, raw_dir = Path(root), Path(raw_dir)
    if not root.is_dir():
        raise DataError(f"raw directory not found: {root}")
    cache = raw_dir / "extracted"
    report: dict = {"root": str(root), "splits": {}}
    for split, items in corpora.items():
        found: list[tuple[Corpus, dict[str, Path]]] = []
        for corpus in items:
            paths = {lang: materialise(corpus.sides[lang], root, cache) for lang in langs}
            missing = [corpus.sides[lang].member for lang, p in paths.items() if p is None]
            if missing:
                where = corpus.sides[langs[0]].archive
                msg = f"{split}: corpus {corpus.name} not found in {root}: {', '.join(missing)}"
                msg += f" (or archive {where})" if where else ""
                if corpus.optional_hint and allow_missing_optional:
                    log(f"  warning: {msg}; skipped. {corpus.optional_hint}")
                    continue
                raise DataError(msg + (f". {corpus.optional_hint}" if corpus.optional_hint else ""))
            found.append((corpus, paths))
        if not found:
            raise DataError(f"{split}: no corpus available")
        counts = {}
        with (
            atomic_open(raw_dir / f"{split}.{langs[0]}") as fa,
            atomic_open(raw_dir / f"{split}.{langs[1]}") as fb,
        ):
            for corpus, paths in found:
                if not corpus.sides[langs[0]].sgm:
                    validate_parallel(paths[langs[0]], paths[langs[1]])
                na = _write_side(paths[langs[0]], corpus.sides[langs[0]].sgm, fa)
                nb = _write_side(paths[langs[1]], corpus.sides[langs[1]].sgm, fb)
                if na != nb:
                    raise DataError(
                        f"{corpus.name}: {paths[langs[0]]} has {na} segments, "
                        f"{paths[langs[1]]} has {nb}"
                    )
                counts[corpus.name] = na
                log(f"  {split}: {corpus.name}: {na} lines")
        report["splits"][split] = counts
    write_json(raw_dir / "sources.json", report)
    return report
