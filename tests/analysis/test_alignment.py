"""Alignment scoring (Och & Ney 2003) and subword-to-word mapping on hand-made examples."""

from __future__ import annotations

import pytest
import torch

from localnmt.analysis.alignment import (
    links_from_attention,
    parse_gold_line,
    score,
    subword_to_word,
)


def test_parse_gold_sure_and_possible():
    gold = parse_gold_line("0-0 1p2 2-1")
    assert gold.sure == {(0, 0), (2, 1)}
    assert gold.possible == {(0, 0), (1, 2), (2, 1)}
    assert parse_gold_line("1-1 2p3", one_based=True).possible == {(0, 0), (1, 2)}
    with pytest.raises(ValueError):
        parse_gold_line("1x2")


def test_aer_hand_made_example():
    # S = {0-0, 1-1}, P = S ∪ {2-1}; A = {0-0, 2-1, 2-2}
    # |A∩S| = 1, |A∩P| = 2  →  AER = 1 − 3/5 = 40 %, P = 2/3, R = 1/2
    gold = parse_gold_line("0-0 1-1 2p1")
    result = score([{(0, 0), (2, 1), (2, 2)}], [gold])
    assert result.aer == pytest.approx(40.0)
    assert result.precision == pytest.approx(200 / 3)
    assert result.recall == pytest.approx(50.0)


def test_aer_is_corpus_level_and_perfect_alignment_is_zero():
    golds = [parse_gold_line("0-0 1-1"), parse_gold_line("0-1 1p0")]
    perfect = score([{(0, 0), (1, 1)}, {(0, 1)}], golds)
    assert perfect.aer == 0.0 and perfect.precision == 100.0 and perfect.recall == 100.0
    # corpus sums: |A| = 2 + 2, |S| = 2 + 1, |A∩S| = 1 + 1, |A∩P| = 1 + 2  →  1 − 5/7
    mixed = score([{(0, 0), (0, 1)}, {(0, 1), (1, 0)}], golds)
    assert mixed.aer == pytest.approx(100 * (1 - 5 / 7))
    assert mixed.precision == pytest.approx(75.0) and mixed.recall == pytest.approx(200 / 3)


def test_subword_to_word_and_links():
    src = "the pen@@ cil case".split()  # words: the, pencil, case
    tgt = "das Mäpp@@ chen".split()  # words: das, Mäppchen
    assert subword_to_word(src) == [0, 1, 1, 2]
    assert subword_to_word(tgt) == [0, 1, 1]
    assert subword_to_word(src, marker="") == [0, 1, 2, 3]
    attention = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.6, 0.1], [0.0, 0.1, 0.1, 0.8]])
    links = links_from_attention(attention, subword_to_word(src), subword_to_word(tgt))
    assert links == {(0, 0), (1, 1), (2, 1)}
