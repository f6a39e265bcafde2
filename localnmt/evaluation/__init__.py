"""Scoring only: BLEU metrics, significance, multi-reference BLEU, breakdowns, post-processing.

Running things (training, translating with fairseq, reproducing tables) is in
:mod:`localnmt.runs`.
"""
