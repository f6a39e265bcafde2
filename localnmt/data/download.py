"""Resumable, checksummed HTTP downloads (the only module here that touches the network).

A download goes to ``<dest>.part``; an interrupted transfer resumes with an HTTP ``Range``
request (a server answering 200 instead of 206 restarts it). The sha256 of each finished file
is recorded in a JSON manifest on first download and verified on every later run; a mismatch
is an error and the file is kept (renamed ``<dest>.bad``) for inspection.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from localnmt.data.steps import DataError, Log, write_json

CHUNK = 1 << 20


class ChecksumError(DataError):
    """A file's sha256 differs from the manifest."""


@dataclass(frozen=True)
class Source:
    """One file to fetch: URL, local file name, and whether it can be fetched automatically."""

    url: str
    filename: str
    manual: str | None = None  # instructions when the file needs a manual download


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def load_manifest(path: Path) -> dict[str, dict]:
    """The manifest (file name → {url, sha256, bytes}), empty if absent."""
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _fetch_once(url: str, part: Path, log: Log, timeout: float) -> None:
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "localnmt-data/1"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # range not satisfiable: the part file is already complete
            return
        raise
    with resp:
        if have and resp.status != 206:
            log(f"  server ignored the range request; restarting {part.name}")
            have = 0
        elif have:
            log(f"  resuming {part.name} at {have / 1e6:.1f} MB")
        length = resp.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        done, last = have, time.monotonic()
        with open(part, "ab" if have else "wb") as f:
            while block := resp.read(CHUNK):
                f.write(block)
                done += len(block)
                if time.monotonic() - last > 5:
                    pct = f" ({100 * done / total:.0f}%)" if total else ""
                    log(f"  {part.name}: {done / 1e6:.1f} MB{pct}")
                    last = time.monotonic()
        if total is not None and done < total:
            raise http.client.IncompleteRead(b"", total - done)


def download(
    url: str, dest: Path, manifest: Path, *, retries: int = 5, timeout: float = 60,
    log: Log = print,
) -> Path:  # fmt: skip
    """Fetch ``url`` to ``dest`` (resuming, retrying), then record or verify its sha256."""
    dest, manifest = Path(dest), Path(manifest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    entries = load_manifest(manifest)
    if not dest.exists():
        part = dest.with_name(dest.name + ".part")
        for attempt in range(1, retries + 1):
            try:
                _fetch_once(url, part, log, timeout)
                break
            except (OSError, http.client.HTTPException) as e:
                if isinstance(e, urllib.error.HTTPError) and e.code in (403, 404, 410):
                    raise DataError(f"{url}: HTTP {e.code}") from None
                if attempt == retries:
                    raise DataError(
                        f"{url}: download failed after {retries} attempts ({e}); "
                        f"partial data kept in {part}, rerun to resume"
                    ) from None
                log(f"  {dest.name}: attempt {attempt} failed ({e}); retrying")
                time.sleep(min(30.0, 0.5 * 2**attempt) if timeout > 1 else 0)
        part.replace(dest)
    else:
        log(f"[skip] {dest.name}: already downloaded")
    digest = sha256_file(dest)
    known = entries.get(dest.name)
    if known and known.get("sha256") != digest:
        bad = dest.with_name(dest.name + ".bad")
        dest.replace(bad)
        raise ChecksumError(
            f"{dest}: sha256 {digest} does not match the manifest {manifest} "
            f"({known.get('sha256')}); the file was moved to {bad}"
        )
    if not known:
        entries[dest.name] = {"url": url, "sha256": digest, "bytes": dest.stat().st_size}
        write_json(manifest, entries)
        log(f"  recorded sha256 of {dest.name} in {manifest.name}")
    return dest


def download_all(sources: list[Source], out_dir: Path, *, log: Log = print) -> list[Path]:
    """Download every automatic source; list the manual ones with their instructions."""
    out_dir = Path(out_dir)
    got, manual = [], []
    for src in sources:
        dest = out_dir / src.filename
        if src.manual:
            (got if dest.exists() else manual).append(dest if dest.exists() else src)
            continue
        log(f"[get ] {src.url}")
        got.append(download(src.url, dest, out_dir / "sha256-manifest.json", log=log))
    for src in manual:
        log(f"[manual] {src.filename}: {src.manual}")
    return got
