"""Read compiled gettext catalogs (.mo) into translation entries.

Own parser (the stdlib ``gettext.GNUTranslations`` merges contexts into its keys and drops
plural structure); follows the GNU .mo layout: magic, revision, N, offsets of the original
and translation string tables, each entry a (length, offset) pair of little- or big-endian
uint32. Contexts are ``msgctxt\\x04msgid``, plurals are NUL-separated.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localnmt.errors import DataError

LE_MAGIC = 0x950412DE
BE_MAGIC = 0xDE120495


@dataclass(frozen=True)
class MoEntry:
    """One catalog entry: original string(s) and translation form(s)."""

    msgid: str
    msgstr: tuple[str, ...]
    msgid_plural: str | None = None
    context: str | None = None


class MoFormatError(DataError, ValueError):
    """The file is not a valid .mo catalog."""


def _charset(header: bytes) -> str:
    m = re.search(rb"charset=([A-Za-z0-9_.:-]+)", header)
    return m.group(1).decode("ascii") if m else "utf-8"


def parse_mo_bytes(data: bytes, name: str = "<bytes>") -> tuple[dict[str, str], list[MoEntry]]:
    """Parse a .mo image; return (header fields, entries without the header entry)."""
    if len(data) < 20:
        raise MoFormatError(f"{name}: too short for a .mo file")
    (magic,) = struct.unpack("<I", data[:4])
    if magic == LE_MAGIC:
        endian = "<"
    elif magic == BE_MAGIC:
        endian = ">"
    else:
        raise MoFormatError(f"{name}: bad magic number {magic:#x}")
    _rev, n, o_orig, o_trans = struct.unpack(endian + "4I", data[4:20])

    def table(offset: int) -> list[bytes]:
        out = []
        for i in range(n):
            length, off = struct.unpack(endian + "2I", data[offset + 8 * i : offset + 8 * i + 8])
            if off + length > len(data):
                raise MoFormatError(f"{name}: string {i} points past end of file")
            out.append(data[off : off + length])
        return out

    originals, translations = table(o_orig), table(o_trans)
    header_raw = b""
    for k, v in zip(originals, translations):
        if k == b"":
            header_raw = v
    charset = _charset(header_raw)
    header: dict[str, str] = {}
    for line in header_raw.decode(charset, errors="replace").splitlines():
        if ":" in line:
            key, val = line.split(":", 1)
            header[key.strip()] = val.strip()
    entries = []
    for k, v in zip(originals, translations):
        if k == b"":
            continue  # header entry
        key = k.decode(charset, errors="replace")
        ctx = None
        if "\x04" in key:
            ctx, key = key.split("\x04", 1)
        msgid, _, plural = key.partition("\x00")
        forms = tuple(v.decode(charset, errors="replace").split("\x00"))
        entries.append(MoEntry(msgid, forms, plural or None, ctx))
    return header, entries


def read_mo(path: Path) -> tuple[dict[str, str], list[MoEntry]]:
    """Parse one .mo file."""
    return parse_mo_bytes(Path(path).read_bytes(), str(path))


def entry_pairs(entry: MoEntry) -> Iterator[tuple[str, str]]:
    """Source/target pairs of one entry.

    Singular msgid pairs with msgstr[0]; for languages with two or more plural forms the
    msgid_plural pairs with msgstr[1] (for one-form languages such as Chinese, msgstr[0] is
    the only, generic translation and pairs with the singular only). Empty translations are
    skipped. Fuzzy entries are never compiled into a .mo by msgfmt (unless ``--use-fuzzy``),
    so a .mo holds no fuzzy flags to filter.
    """
    if entry.msgstr and entry.msgstr[0]:
        yield entry.msgid, entry.msgstr[0]
    if entry.msgid_plural and len(entry.msgstr) > 1 and entry.msgstr[1]:
        yield entry.msgid_plural, entry.msgstr[1]
