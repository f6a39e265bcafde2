"""Downloads: over https, and checked on the first download too: training archives against
their published sha256, test sets fetched by sacrebleu's downloader and checked with its md5.
No network: ``urllib.request.urlopen`` serves local bytes."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.request

import pytest

from localnmt.data import wmt14_en_de, wmt17_zh_en, wmt_en_ru
from localnmt.data.download import ChecksumError, Source, download_all

FAKE = b"not the archive you were promised\n" * 1000


class _Response(io.BytesIO):
    status = 200

    @property
    def headers(self) -> dict:
        return {"Content-Length": str(len(self.getvalue()))}


@pytest.fixture
def served(monkeypatch) -> list[str]:
    """Every URL asked for gets FAKE; returns the URLs asked for, in order."""
    asked: list[str] = []

    def urlopen(request, *args, **kwargs):
        asked.append(request if isinstance(request, str) else request.full_url)
        return _Response(FAKE)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return asked


def test_every_automatic_download_is_https() -> None:
    for module in (wmt14_en_de, wmt17_zh_en, wmt_en_ru):
        for source in module.SOURCES:
            assert source.manual or source.url.startswith("https://"), source.url


def test_a_training_archive_is_checked_against_its_published_sha256(tmp_path, served) -> None:
    url = "https://statmt.org/wmt13/training-parallel-europarl-v7.tgz"
    dest = tmp_path / "training-parallel-europarl-v7.tgz"
    with pytest.raises(ChecksumError) as err:
        download_all([Source(url, dest.name)], tmp_path, log=lambda m: None)
    got = hashlib.sha256(FAKE).hexdigest()
    assert str(err.value).startswith(
        f"{dest}: sha256 {got} is not the expected "
        "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7 (published"
    )
    assert "Run the same command again to download it anew" in str(err.value)
    assert not dest.exists() and (tmp_path / f"{dest.name}.bad").read_bytes() == FAKE
    assert not (tmp_path / "sha256-manifest.json").exists()  # nothing trusted


def test_a_test_set_comes_through_sacrebleu_and_its_md5(tmp_path, served, monkeypatch):
    import sacrebleu.utils
    from sacrebleu.dataset import DATASETS

    through_sacrebleu: list[str] = []
    real = sacrebleu.utils.download_file
    monkeypatch.setattr(
        sacrebleu.utils,
        "download_file",
        lambda url, *a, **k: through_sacrebleu.append(url) or real(url, *a, **k),
    )
    source = Source("https://statmt.org/wmt14/test-full.tgz", "test-full.tgz")
    with pytest.raises(ChecksumError, match="md5 .* \\(sacrebleu's for its test set wmt14/full\\)"):
        download_all([source], tmp_path, log=lambda m: None)
    assert through_sacrebleu == DATASETS["wmt14/full"].data == [source.url]
    # the archive sacrebleu knows (here: its md5 made to be FAKE's) is kept and recorded
    monkeypatch.setattr(DATASETS["wmt14/full"], "md5", [hashlib.md5(FAKE).hexdigest()])
    (path,) = download_all([source], tmp_path, log=lambda m: None)
    assert path.read_bytes() == FAKE and not list(tmp_path.glob("*.lock"))
    manifest = json.loads((tmp_path / "sha256-manifest.json").read_text())
    assert manifest["test-full.tgz"]["sha256"] == hashlib.sha256(FAKE).hexdigest()
