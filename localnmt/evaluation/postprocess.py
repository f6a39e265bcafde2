"""Turn fairseq hypotheses back into plain text, and tokenise text the way the papers scored it."""

from __future__ import annotations

import re
from functools import lru_cache

from sacremoses import MosesDetokenizer, MosesTokenizer

CJK_LANGS = ("zh", "ja")
_CJK = (
    r"\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uf900-\ufaff\uff00-\uffef"
)
_CJK_SPACE = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])")
_BPE_SUBWORD_NMT = re.compile(r"(@@ )|(@@ ?$)")
_COMPOUND = re.compile(r"(\S)-(\S)")


def remove_bpe(text: str, bpe: str = "subword_nmt") -> str:
    """Undo subword units: ``subword_nmt`` (``@@ ``), ``sentencepiece`` (``▁``) or ``none``."""
    if bpe == "subword_nmt":
        return _BPE_SUBWORD_NMT.sub("", text).strip()
    if bpe == "sentencepiece":
        return text.replace(" ", "").replace("\u2581", " ").strip()
    if bpe in ("none", "", None):
        return text.strip()
    raise ValueError(f"unknown bpe {bpe!r}")


@lru_cache(maxsize=8)
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


@lru_cache(maxsize=8)
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


def remove_cjk_spaces(text: str) -> str:
    """Remove the spaces a word segmenter (jieba) put between CJK characters."""
    return _CJK_SPACE.sub("", text)


def detokenize(text: str, lang: str, method: str = "moses") -> str:
    """Moses detokenisation; for Chinese/Japanese also join CJK characters. ``method='none'``."""
    if method == "none":
        return text.strip()
    if method != "moses":
        raise ValueError(f"unknown detokenizer {method!r}")
    out = _detokenizer("en" if lang in CJK_LANGS else lang).detokenize(text.split())
    if lang in CJK_LANGS:
        out = remove_cjk_spaces(out)
    return out.strip()


def split_compounds(text: str) -> str:
    """tensor2tensor/get_ende_bleu.sh compound splitting: ``a-b`` -> ``a ##AT##-##AT## b``."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


def moses_tokenize(text: str, lang: str, compound_split: bool | None = None) -> str:
    """Moses-tokenise (no XML escaping) as for multi-bleu; German splits compounds by default."""
    out = _tokenizer(lang).tokenize(text, return_str=True, escape=False)
    if compound_split if compound_split is not None else lang == "de":
        out = split_compounds(out)
    return out


def postprocess(text: str, lang: str, bpe: str = "subword_nmt", detok: str = "moses") -> str:
    """BPE removal then detokenisation: a fairseq ``H-`` line to plain text."""
    return detokenize(remove_bpe(text, bpe), lang, detok)
