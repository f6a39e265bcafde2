"""WMT14 English→Russian (Pande et al. 2021, Tables 1–3 En-Ru column).

Pande et al. name only "WMT'14 English-Russian", newstest2014 for evaluation (Section 5.1;
the introduction also mentions newstest2018, kept here as a second test set). Train: the
WMT14 constrained Ru-En corpora Common Crawl and News Commentary v9 (automatic download) and
Yandex 1M (manual download, see :data:`YANDEX_HINT`); Wiki Headlines is left out (a `` ||| ``
list of titles, not sentences). Valid: newstest2013; tests: newstest2014 (subset ``test``),
newstest2018 (subset ``test1``). Moses normalise + tokenise for both languages (sacremoses
has Russian rules), joint BPE 32K and joined dictionary, train cleaned to 1..250 subwords with
ratio 1.5 after BPE (the same recipe as WMT14 En-De; the paper gives no BPE details).

Batch: Pande et al. train En-Ru with 25K tokens per update, reached by accumulating
gradients; :func:`update_freq_25k` gives ``--update-freq`` for a GPU count and
``--max-tokens`` (1 GPU × 4096 → 7, i.e. 28,672 tokens; 1 GPU × 3584 → 7, 25,088 tokens).

    python -m localnmt.data.wmt_en_ru download --dir RAW
    python -m localnmt.data.wmt_en_ru process --raw-dir RAW --workdir OUT
"""

from __future__ import annotations

import sys

from localnmt.batching import update_freq
from localnmt.data.corpus_pipeline import LengthClean, ProcessConfig
from localnmt.data.download import Source
from localnmt.data.wmt_cli import main as wmt_main
from localnmt.data.wmt_extract import Corpus, Text

#: Tokens per update of Pande et al.'s En-Ru runs (Section 5.1).
PANDE_TOKENS_PER_UPDATE = 25_000

YANDEX_HINT = (
    "Yandex 1M En-Ru needs a manual download (https://translate.yandex.ru/corpus?lang=en, "
    "accept the licence): put corpus.en_ru.1m.en and corpus.en_ru.1m.ru (plain or .gz) "
    "into the raw directory"
)

SOURCES = [
    Source("https://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
           "training-parallel-commoncrawl.tgz"),
    Source("https://statmt.org/wmt14/training-parallel-nc-v9.tgz", "training-parallel-nc-v9.tgz"),
    Source("https://data.statmt.org/wmt17/translation-task/dev.tgz", "dev.tgz"),
    Source("https://statmt.org/wmt14/test-full.tgz", "test-full.tgz"),
    Source("https://data.statmt.org/wmt18/translation-task/test.tgz", "wmt18-test.tgz"),
    Source("https://translate.yandex.ru/corpus", "corpus.en_ru.1m.en", manual=YANDEX_HINT),
]  # fmt: skip


def _plain(prefix: str, archive: str | None) -> dict[str, Text]:
    return {lang: Text(f"{prefix}.{lang}", archive) for lang in ("en", "ru")}


def _sgm(src: str, ref: str, archive: str) -> dict[str, Text]:
    return {"en": Text(src, archive, sgm=True), "ru": Text(ref, archive, sgm=True)}


CORPORA: dict[str, list[Corpus]] = {
    "train": [
        Corpus("commoncrawl", _plain("commoncrawl.ru-en", "training-parallel-commoncrawl.tgz")),
        Corpus("news-commentary-v9", _plain("training/news-commentary-v9.ru-en",
                                            "training-parallel-nc-v9.tgz")),
        Corpus("yandex-1m", _plain("corpus.en_ru.1m", None), optional_hint=YANDEX_HINT),
    ],
    "valid": [Corpus("newstest2013", _plain("dev/newstest2013", "dev.tgz"))],
    "test": [Corpus("newstest2014", _sgm("test-full/newstest2014-ruen-src.en.sgm",
                                         "test-full/newstest2014-ruen-ref.ru.sgm",
                                         "test-full.tgz"))],
    "test2018": [Corpus("newstest2018", _sgm("test/newstest2018-enru-src.en.sgm",
                                             "test/newstest2018-enru-ref.ru.sgm",
                                             "wmt18-test.tgz"))],
}  # fmt: skip

CONFIG = ProcessConfig(
    src="en", tgt="ru", bpe="subword_nmt", bpe_size=32000, joint_bpe=True,
    joined_dictionary=True, length_clean=LengthClean(1, 250, 1.5, stage="bpe"),
    tests=("test", "test2018"),
)  # fmt: skip


def update_freq_25k(world_size: int, max_tokens: int) -> int:
    """``--update-freq`` reaching Pande et al.'s 25K tokens per update."""
    return update_freq(world_size, max_tokens, PANDE_TOKENS_PER_UPDATE)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    return wmt_main(argv, name="wmt_en_ru", sources=SOURCES, corpora=CORPORA, config=CONFIG)


if __name__ == "__main__":
    sys.exit(main())
