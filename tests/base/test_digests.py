"""localnmt.digests: file and folder digests, and a cache that is used only while it is true."""

from __future__ import annotations

import hashlib
import json
import os

from localnmt.digests import content_digest, file_digest, sha256_file, tree_digest


def test_sha256_of_a_file_is_hashlibs(tmp_path):
    path = tmp_path / "a"
    path.write_bytes(b"abc" * 1000)
    assert sha256_file(path) == hashlib.sha256(b"abc" * 1000).hexdigest()
    assert sha256_file(path, "md5") == hashlib.md5(b"abc" * 1000).hexdigest()


def test_the_cache_answers_for_an_unchanged_file_and_not_for_a_rewritten_one(tmp_path):
    path, cache = tmp_path / "a", tmp_path / "cache" / "digests.json"
    path.write_bytes(b"one")
    first = file_digest(path, cache)
    assert first == hashlib.sha256(b"one").hexdigest()
    entry = json.loads(cache.read_text())[str(path.resolve())]
    entry["sha256"] = "remembered"  # the cache is what answers while the file is unchanged
    cache.write_text(json.dumps({str(path.resolve()): entry}))
    assert file_digest(path, cache) == "remembered"
    stat = path.stat()
    path.write_bytes(b"two")  # rewritten, its modification time set back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_digest(path, cache) == hashlib.sha256(b"two").hexdigest()


def test_a_data_bin_digest_covers_names_and_contents_of_its_data_files_only(tmp_path):
    data = tmp_path / "bin"
    data.mkdir()
    (data / "dict.en.txt").write_text("a 1\n")
    (data / "train.en-de.en.bin").write_bytes(b"\x01")
    (data / "train.en-de.en.idx").write_bytes(b"\x02")
    before = content_digest(data)
    (data / "notes.txt").write_text("not data")
    assert content_digest(data) == before == tree_digest(data)
    (data / "train.en-de.en.bin").write_bytes(b"\x03")
    assert content_digest(data) != before


def test_other_folders_digest_every_file_and_missing_paths_are_none(tmp_path):
    refs = tmp_path / "refs"
    refs.mkdir()
    (refs / "ref0").write_text("x")
    before = content_digest(refs)
    (refs / "ref1").write_text("y")
    assert content_digest(refs) != before
    assert content_digest(tmp_path / "missing") is None and content_digest(None) is None
