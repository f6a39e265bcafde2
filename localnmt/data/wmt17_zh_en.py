"""WMT17 Chinese→English (Yang et al. 2018/2019 setting: about 20M pairs, max length 50).

Train: News Commentary v12 (automatic download), UN Parallel Corpus v1.0 and CWMT
(both need a manual download, see :data:`UN_HINT` / :data:`CWMT_HINT`). Valid:
newsdev2017; test: newstest2017. jieba for Chinese, Moses for English, training pairs longer
than 50 words on either side dropped (after tokenisation; ratio limit 9, Moses' default).
Subwords: **separate** BPE with 32K merges per language and separate dictionaries (the two
scripts share almost no symbols); ``--joint`` switches to joint BPE + joined dictionary.

    python -m localnmt.data.wmt17_zh_en download --dir RAW
    python -m localnmt.data.wmt17_zh_en process --raw-dir RAW --workdir OUT
"""

from __future__ import annotations

import argparse
import sys

from localnmt.data.corpus_pipeline import LengthClean, ProcessConfig
from localnmt.data.download import Source
from localnmt.data.wmt_cli import main as wmt_main
from localnmt.data.wmt_extract import Corpus, Text

UN_HINT = (
    "UN Parallel Corpus v1.0 needs a manual download (https://conferences.unite.un.org/uncorpus"
    ", files UNv1.0.en-zh.tar.gz.00/.01): concatenate, extract, and put "
    "UNv1.0.en-zh.zh and UNv1.0.en-zh.en (plain or .gz) into the raw directory"
)
# CWMT's page is plain http (the host serves no https); it is only shown, never fetched
CWMT_HINT = (
    "CWMT corpora need registration (http://nlp.nju.edu.cn/cwmt-wmt/): convert each to "
    "aligned plain files cwmt/<name>.zh and cwmt/<name>.en in the raw directory "
    "(casia2015, casict2011, casict2015, datum2015, datum2017, neu2017)"
)
CWMT_NAMES = ("casia2015", "casict2011", "casict2015", "datum2015", "datum2017", "neu2017")

SOURCES = [
    Source("https://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz",
           "training-parallel-nc-v12.tgz"),
    Source("https://data.statmt.org/wmt17/translation-task/dev.tgz", "dev.tgz"),
    Source("https://data.statmt.org/wmt17/translation-task/test.tgz", "test.tgz"),
    Source("https://conferences.unite.un.org/uncorpus", "UNv1.0.en-zh.zh", manual=UN_HINT),
    *[Source("http://nlp.nju.edu.cn/cwmt-wmt/", f"cwmt/{n}.zh", manual=CWMT_HINT)
      for n in CWMT_NAMES],
]  # fmt: skip

CORPORA: dict[str, list[Corpus]] = {
    "train": [
        Corpus("news-commentary-v12", {
            lang: Text(f"training/news-commentary-v12.zh-en.{lang}",
                       "training-parallel-nc-v12.tgz") for lang in ("zh", "en")}),
        Corpus("un-v1.0", {lang: Text(f"UNv1.0.en-zh.{lang}") for lang in ("zh", "en")},
               optional_hint=UN_HINT),
        *[Corpus(f"cwmt-{n}", {lang: Text(f"cwmt/{n}.{lang}") for lang in ("zh", "en")},
                 optional_hint=CWMT_HINT) for n in CWMT_NAMES],
    ],
    "valid": [Corpus("newsdev2017", {
        "zh": Text("dev/newsdev2017-zhen-src.zh.sgm", "dev.tgz", sgm=True),
        "en": Text("dev/newsdev2017-zhen-ref.en.sgm", "dev.tgz", sgm=True)})],
    "test": [Corpus("newstest2017", {
        "zh": Text("test/newstest2017-zhen-src.zh.sgm", "test.tgz", sgm=True),
        "en": Text("test/newstest2017-zhen-ref.en.sgm", "test.tgz", sgm=True)})],
}  # fmt: skip

CONFIG = ProcessConfig(
    src="zh", tgt="en", bpe="subword_nmt", bpe_size=32000, joint_bpe=False,
    joined_dictionary=False, length_clean=LengthClean(1, 50, 9.0, stage="tok"),
    tests=("test",),
)  # fmt: skip


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--joint", action="store_true", help="joint BPE and joined dictionary")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    return wmt_main(argv, name="wmt17_zh_en", sources=SOURCES, corpora=CORPORA, config=CONFIG,
                    extra_args=_extra)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
