"""What a data-bin's ``localnmt_data.json`` records, read back for translation and scoring.

Written by :func:`localnmt.data.corpus_pipeline.process_corpus` (every ``data_prep`` pipeline).
Data-bins written before the per-language fields existed are read from their ``config``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from localnmt.data.bpe import model_filename
from localnmt.data.text_tokenize import tokenizer_name
from localnmt.errors import DataError

FILENAME = "localnmt_data.json"


@dataclass(frozen=True)
class DataInfo:
    """Languages, tokeniser and subword model of each side of a prepared corpus."""

    src: str
    tgt: str
    tokenizer: dict[str, str]  # language → jieba | janome | moses | none
    normalize: dict[str, bool]  # language → Moses punctuation normalisation applied
    bpe: str  # subword_nmt | sentencepiece
    bpe_model: dict[str, Path]  # language → model file in the data-bin

    @property
    def detok(self) -> str:
        """How target text is detokenised: ``moses``, or ``none`` for a pre-tokenised target
        (its references stay tokenised too)."""
        return "none" if self.tokenizer[self.tgt] == "none" else "moses"


def read_metadata(data_bin: Path) -> DataInfo:
    """Read ``data_bin/localnmt_data.json``; one clear error when it is missing."""
    path = Path(data_bin) / FILENAME
    if not path.is_file():
        raise DataError(
            f"{path} not found: this data-bin was not made by a localnmt data_prep pipeline. "
            "Use fairseq-interactive with --tokenizer moses --bpe subword_nmt --bpe-codes CODES "
            "(or prepare the corpus with data_prep/prepare_parallel.sh)"
        )
    meta = json.loads(path.read_text(encoding="utf-8"))
    cfg = meta.get("config", {})
    src, tgt = meta.get("src", cfg.get("src")), meta.get("tgt", cfg.get("tgt"))
    langs = (src, tgt)
    pretok = bool(cfg.get("pretokenized", False))
    tokenizer = meta.get("tokenizer") or {lang: tokenizer_name(lang, pretok) for lang in langs}
    normalize = meta.get("normalize") or {
        lang: tokenizer[lang] == "moses" and (lang != tgt or cfg.get("normalize_target", True))
        for lang in langs
    }
    kind = meta.get("bpe", cfg.get("bpe", "subword_nmt"))
    models = meta.get("bpe_model") or {
        lang: model_filename(kind) if cfg.get("joint_bpe", True) else
        model_filename(kind, f"bpe.{lang}")
        for lang in langs
    }  # fmt: skip
    return DataInfo(src, tgt, tokenizer, normalize, kind,
                    {lang: Path(data_bin) / name for lang, name in models.items()})  # fmt: skip


def post_processing(
    data_bin: Path, bpe: str | None = None, detok: str | None = None
) -> tuple[str, str]:
    """``(subword scheme, detokeniser)`` that turn this data-bin's hypotheses into text: the
    given ones, else what its ``localnmt_data.json`` records, else ``subword_nmt`` and
    ``moses`` (a data-bin made elsewhere, e.g. by fairseq's own preparation scripts)."""
    if (bpe is None or detok is None) and (Path(data_bin) / FILENAME).is_file():
        info = read_metadata(data_bin)
        bpe, detok = bpe or info.bpe, detok or info.detok
    return bpe or "subword_nmt", detok or "moses"
