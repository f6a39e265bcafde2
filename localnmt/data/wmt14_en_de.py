"""WMT14 English→German (as fairseq's examples/translation/prepare-wmt14en2de.sh --icml17).

Train: Europarl v7 + Common Crawl + News Commentary v9 (about 4.5M pairs). Valid:
newstest2013. Tests: newstest2014 full (3003 lines; fairseq subset ``test``) and the
filtered version (2737 lines; subset ``test1``). Moses normalise + tokenise, joint BPE 32K,
train cleaned to 1..250 subwords with ratio 1.5 (after BPE, as fairseq's script), joined
dictionary.

    python -m localnmt.data.wmt14_en_de download --dir RAW
    python -m localnmt.data.wmt14_en_de process --raw-dir RAW --workdir OUT
"""

from __future__ import annotations

import sys

from localnmt.data.corpus_pipeline import LengthClean, ProcessConfig
from localnmt.data.download import Source
from localnmt.data.wmt_cli import main as wmt_main
from localnmt.data.wmt_extract import Corpus, Text

SOURCES = [
    Source("https://statmt.org/wmt13/training-parallel-europarl-v7.tgz",
           "training-parallel-europarl-v7.tgz"),
    Source("https://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
           "training-parallel-commoncrawl.tgz"),
    Source("https://statmt.org/wmt14/training-parallel-nc-v9.tgz", "training-parallel-nc-v9.tgz"),
    Source("https://data.statmt.org/wmt17/translation-task/dev.tgz", "dev.tgz"),
    Source("https://statmt.org/wmt14/test-full.tgz", "test-full.tgz"),
    Source("https://statmt.org/wmt14/test-filtered.tgz", "test-filtered.tgz"),
]  # fmt: skip


def _plain(prefix: str, archive: str) -> dict[str, Text]:
    return {lang: Text(f"{prefix}.{lang}", archive) for lang in ("en", "de")}


def _sgm(prefix: str, archive: str) -> dict[str, Text]:
    return {
        "en": Text(f"{prefix}-src.en.sgm", archive, sgm=True),
        "de": Text(f"{prefix}-ref.de.sgm", archive, sgm=True),
    }


CORPORA: dict[str, list[Corpus]] = {
    "train": [
        Corpus("europarl-v7", _plain("training/europarl-v7.de-en",
                                     "training-parallel-europarl-v7.tgz")),
        Corpus("commoncrawl", _plain("commoncrawl.de-en", "training-parallel-commoncrawl.tgz")),
        Corpus("news-commentary-v9", _plain("training/news-commentary-v9.de-en",
                                            "training-parallel-nc-v9.tgz")),
    ],
    "valid": [Corpus("newstest2013", _plain("dev/newstest2013", "dev.tgz"))],
    "test": [Corpus("newstest2014-full", _sgm("test-full/newstest2014-deen", "test-full.tgz"))],
    "test_filtered": [
        Corpus("newstest2014-filtered", _sgm("test/newstest2014-deen", "test-filtered.tgz"))
    ],
}  # fmt: skip

CONFIG = ProcessConfig(
    src="en", tgt="de", bpe="subword_nmt", bpe_size=32000, joint_bpe=True,
    joined_dictionary=True, length_clean=LengthClean(1, 250, 1.5, stage="bpe"),
    tests=("test", "test_filtered"),
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    return wmt_main(argv, name="wmt14_en_de", sources=SOURCES, corpora=CORPORA, config=CONFIG)


if __name__ == "__main__":
    sys.exit(main())
