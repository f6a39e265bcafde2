"""Published checksums of the archives the WMT pipelines download, so that the first download
is checked too (not only later ones against the manifest it wrote).

Training archives are pinned by sha256; the test-set archives that sacrebleu carries are
fetched by sacrebleu's own downloader and checked with its md5 (:mod:`localnmt.data.download`).
An archive in neither table (WMT17's ``dev.tgz``) is checked against the manifest its first
download recorded.
"""

from __future__ import annotations

import re

#: sha256 of the training archives, by :func:`url_key`, as TensorFlow Datasets records them
#: (``tensorflow_datasets/url_checksums/wmt14_translate.txt`` and ``wmt17_translate.txt``).
SHA256 = {
    "statmt.org/wmt13/training-parallel-europarl-v7.tgz":
        "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
    "statmt.org/wmt13/training-parallel-commoncrawl.tgz":
        "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
    "statmt.org/wmt14/training-parallel-nc-v9.tgz":
        "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
    "data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz":
        "2b45f30ef1d550d302fd17dd3a5cbe19134ccc4c2cf50c2dae534aee600101a2",
}  # fmt: skip

#: Test-set archives that sacrebleu carries, by :func:`url_key`: its test-set name.
SACREBLEU_TEST_SETS = {
    "statmt.org/wmt14/test-full.tgz": "wmt14/full",
    "statmt.org/wmt14/test-filtered.tgz": "wmt14",
    "data.statmt.org/wmt17/translation-task/test.tgz": "wmt17",
    "data.statmt.org/wmt18/translation-task/test.tgz": "wmt18",
}

_SCHEME = re.compile(r"^[a-z]+://(www\.)?")


def url_key(url: str) -> str:
    """``https://www.statmt.org/wmt14/x.tgz`` -> ``statmt.org/wmt14/x.tgz``: the same file
    whatever the scheme, with or without ``www.``."""
    return _SCHEME.sub("", url)


def pinned_sha256(url: str) -> str | None:
    """The published sha256 of the file at ``url``, if it is pinned."""
    return SHA256.get(url_key(url))


def sacrebleu_test_set(url: str) -> str | None:
    """The sacrebleu test set whose archive ``url`` is, if sacrebleu carries it."""
    return SACREBLEU_TEST_SETS.get(url_key(url))
