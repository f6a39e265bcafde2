"""Resumable, checksummed HTTPS downloads (the only module here that touches the network).

A download goes to ``<dest>.part``; an interrupted transfer resumes with an HTTP ``Range``
request (a server answering 200 instead of 206 restarts it). A finished file is checked
against its published checksum when :mod:`localnmt.data.checksums` has one (sha256 of the
training archives); test-set archives that sacrebleu carries are fetched by sacrebleu's own
downloader and checked with its md5. The sha256 of each file is also recorded in a JSON
manifest on first download and verified on every later run. A mismatch is an error naming the
file, both checksums and what to do; the file is kept (renamed ``<dest>.bad``) for inspection.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from localnmt.atomic import write_json
from localnmt.data.checksums import pinned_sha256, sacrebleu_test_set
from localnmt.digests import sha256_file
from localnmt.errors import ChecksumError, DataError
from localnmt.steps import Log

CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """One file to fetch: URL, local file name, and whether it can be fetched automatically."""

    url: str
    filename: str
    manual: str | None = None  # instructions when the file needs a manual download


def _mismatch(path: Path, kind: str, got: str, expected: str, source: str) -> ChecksumError:
    """Move a file whose checksum is wrong aside (``.bad``) and say so, and what to do."""
    bad = path.with_name(path.name + ".bad")
    path.replace(bad)
    return ChecksumError(
        f"{path}: {kind} {got} is not the expected {expected} ({source}); the file was moved "
        f"to {bad}. Run the same command again to download it anew; if it differs again, the "
        "server's copy has changed: check it before using it"
    )


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
    pinned = pinned_sha256(url)
    if pinned and digest != pinned:
        raise _mismatch(dest, "sha256", digest, pinned, "published, localnmt.data.checksums")
    return _check_manifest(dest, url, digest, manifest, log)


def _check_manifest(dest: Path, url: str, digest: str, manifest: Path, log: Log) -> Path:
    """Verify ``dest``'s sha256 against the manifest, or record it there on first download."""
    entries = load_manifest(manifest)
    known = entries.get(dest.name)
    if known and known.get("sha256") != digest:
        raise _mismatch(dest, "sha256", digest, known.get("sha256"), f"recorded in {manifest}")
    if not known:
        entries[dest.name] = {"url": url, "sha256": digest, "bytes": dest.stat().st_size}
        write_json(manifest, entries)
        log(f"  recorded sha256 of {dest.name} in {manifest.name}")
    return dest


def fetch_test_set(name: str, url: str, dest: Path, manifest: Path, *, log: Log = print) -> Path:
    """A test-set archive that sacrebleu carries (its test set ``name``): fetched by sacrebleu's
    downloader from sacrebleu's address for it, checked with sacrebleu's md5 (also when it was
    downloaded before), then recorded in the manifest like every download."""
    from sacrebleu.dataset import DATASETS
    from sacrebleu.utils import download_file

    dataset = DATASETS[name]
    basename = url.rsplit("/", 1)[-1]
    index = next(i for i, u in enumerate(dataset.data) if u.rsplit("/", 1)[-1] == basename)
    sb_url, md5 = dataset.data[index], dataset.md5[index]
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        part = dest.with_name(dest.name + ".part")
        part.unlink(missing_ok=True)  # sacrebleu's downloader cannot resume: start over
        try:
            download_file(sb_url, str(part))
        except (OSError, http.client.HTTPException) as e:
            raise DataError(
                f"{sb_url}: download failed ({e}); run the same command again"
            ) from None
        except SystemExit:  # sacrebleu's answer to an SSL error, after logging it
            raise DataError(f"{sb_url}: download failed (SSL error, see above)") from None
        finally:
            Path(f"{part}.lock").unlink(missing_ok=True)  # sacrebleu's lock file
        part.replace(dest)
    else:
        log(f"[skip] {dest.name}: already downloaded")
    got = sha256_file(dest, "md5")
    if got != md5:
        raise _mismatch(dest, "md5", got, md5, f"sacrebleu's for its test set {name}")
    return _check_manifest(dest, url, sha256_file(dest), manifest, log)


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
        manifest = out_dir / "sha256-manifest.json"
        if test_set := sacrebleu_test_set(src.url):
            got.append(fetch_test_set(test_set, src.url, dest, manifest, log=log))
        else:
            got.append(download(src.url, dest, manifest, log=log))
    for src in manual:
        log(f"[manual] {src.filename}: {src.manual}")
    return got
