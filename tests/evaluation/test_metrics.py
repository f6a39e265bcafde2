"""Post-processing and BLEU against sacrebleu's own API."""

import pytest
from sacrebleu.metrics import BLEU

from localnmt.evaluation.metrics import sacrebleu_score, tokenize_for_bleu, tokenized_bleu
from localnmt.evaluation.postprocess import (
    detokenize,
    moses_tokenize,
    postprocess,
    remove_bpe,
    remove_cjk_spaces,
    split_compounds,
)

HYPS = ["Der Hund bellt laut.", "Das ist ein E-Mail-Programm.", "Es regnet heute nicht."]
REFS = ["Der Hund bellt sehr laut.", "Dies ist ein E-Mail-Programm.", "Heute regnet es nicht."]


def test_remove_bpe_variants() -> None:
    assert remove_bpe("Pa@@ ke@@ t@@ listen werden ge@@") == "Paketlisten werden ge"
    assert remove_bpe("\u2581Der \u2581Hu nd", "sentencepiece") == "Der Hund"
    assert remove_bpe(" a b ", "none") == "a b"


def test_detokenize_moses_and_chinese() -> None:
    assert detokenize("Der Hund , der bellt .", "de") == "Der Hund, der bellt."
    assert detokenize("我 爱 北京 天安门 。", "zh") == "我爱北京天安门。"
    assert remove_cjk_spaces("用 Linux 系统 工作") == "用 Linux 系统工作"
    assert postprocess("Der Hu@@ nd bell@@ t .", "de") == "Der Hund bellt."


def test_compound_splitting_matches_get_ende_bleu() -> None:
    # same non-overlapping matching as perl's s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g
    assert split_compounds("E-Mail-Programm") == "E ##AT##-##AT## Mail ##AT##-##AT## Programm"
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    assert split_compounds("a - b x-y") == "a - b x ##AT##-##AT## y"
    assert moses_tokenize("Das E-Mail.", "de") == "Das E ##AT##-##AT## Mail ."
    assert moses_tokenize("E-Mail", "en") == "E-Mail"


def test_sacrebleu_score_equals_sacrebleu_api() -> None:
    ours = sacrebleu_score(HYPS, REFS, "de")
    metric = BLEU()
    theirs = metric.corpus_score(HYPS, [REFS])
    assert ours.score == theirs.score
    assert ours.precisions == theirs.precisions
    assert ours.signature == str(metric.get_signature())
    assert "tok:13a" in ours.signature
    assert "tok:zh" in sacrebleu_score(["我爱你"], ["我爱你"], "zh").signature


def test_tokenized_bleu_is_multibleu_on_moses_tokens() -> None:
    tok_h, tok_r = tokenize_for_bleu(HYPS, "de"), tokenize_for_bleu(REFS, "de")
    assert tok_h[1] == "Das ist ein E ##AT##-##AT## Mail ##AT##-##AT## Programm ."
    expected = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(tok_h, [tok_r])
    assert tokenized_bleu(HYPS, REFS, "de").score == expected.score
    assert tokenized_bleu(REFS, REFS, "de").score == pytest.approx(100.0)
