"""Subword segmentation: subword-nmt BPE (default) or sentencepiece, learned on train only."""

from __future__ import annotations

import io
import os
from collections import Counter
from functools import lru_cache
from pathlib import Path

from localnmt import progress
from localnmt.atomic import atomic_open, atomic_path
from localnmt.data.text_tokenize import map_lines
from localnmt.data.validate import iter_lines_checked
from localnmt.errors import DataError

BPE_KINDS = ("subword_nmt", "sentencepiece")


def model_filename(kind: str, name: str = "bpe") -> str:
    """File name of a learned model (``bpe.codes`` or ``bpe.model``)."""
    if kind not in BPE_KINDS:
        raise DataError(f"unknown --bpe {kind!r}; choose one of {', '.join(BPE_KINDS)}")
    return f"{name}.codes" if kind == "subword_nmt" else f"{name}.model"


def learn(kind: str, train_files: list[Path], model: Path, size: int, workers: int = 1) -> None:
    """Learn one model on the concatenation of ``train_files`` (joint if several languages).

    subword_nmt: ``size`` merge operations (min frequency 2). sentencepiece: a BPE model
    whose vocabulary is the distinct characters plus ``size`` (so ``size`` means about the
    same number of merges for both; soft limit, so tiny corpora do not fail).
    """
    if kind == "subword_nmt":
        from subword_nmt.learn_bpe import learn_bpe

        vocab: Counter = Counter()
        for p in train_files:
            for line in iter_lines_checked(p):
                vocab.update(line.split())
        counts = io.StringIO("".join(f"{w} {c}\n" for w, c in sorted(vocab.items())))
        with atomic_open(model) as out:
            learn_bpe(counts, out, size, min_frequency=2, is_dict=True)
    elif kind == "sentencepiece":
        import sentencepiece as spm

        model.parent.mkdir(parents=True, exist_ok=True)
        tmp_txt = model.with_name(f".{model.name}.train{os.getpid()}.txt")
        chars: set[str] = set()
        try:
            with open(tmp_txt, "w", encoding="utf-8") as f:
                for p in train_files:
                    for line in iter_lines_checked(p):
                        chars.update(line)
                        f.write(line + "\n")
            with atomic_path(model) as tmp_model:
                prefix = tmp_model.with_suffix("")
                spm.SentencePieceTrainer.train(
                    input=str(tmp_txt),
                    model_prefix=str(prefix),
                    vocab_size=size + len(chars) + 4,
                    model_type="bpe",
                    character_coverage=0.9995,
                    hard_vocab_limit=False,
                    num_threads=max(1, workers),
                    input_sentence_size=2_000_000,
                    shuffle_input_sentence=True,
                    minloglevel=2,
                )
                Path(f"{prefix}.model").replace(tmp_model)
                Path(f"{prefix}.vocab").unlink(missing_ok=True)
        finally:
            tmp_txt.unlink(missing_ok=True)
    else:
        model_filename(kind)


@lru_cache(maxsize=4)
def _segmenter(kind: str, model: str):
    if kind == "subword_nmt":
        from subword_nmt.apply_bpe import BPE

        with open(model, encoding="utf-8") as f:
            bpe = BPE(f)
        return lambda s: bpe.process_line(s).strip()
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=model)
    return lambda s: " ".join(sp.encode(s, out_type=str))


def segmenter(kind: str, model: Path):
    """The function that segments one tokenised line with a learned model (cached)."""
    if not Path(model).is_file():
        raise DataError(f"subword model not found: {model}")
    return _segmenter(kind, str(model))


def _apply_chunk(args: tuple[str, list[str]]) -> list[str]:
    key, lines = args
    kind, model = key.split("\t", 1)
    seg = _segmenter(kind, model)
    return [seg(line) for line in lines]


def apply_file(kind: str, model: Path, inp: Path, out: Path, workers: int = 1) -> int:
    """Segment a tokenised file into ``out`` atomically; return the line count."""
    n = 0
    with atomic_open(out) as f:
        lines = iter_lines_checked(inp)
        shown = {"desc": f"segmenting {inp.name}", "total": progress.lines_in(inp)}
        for line in map_lines(_apply_chunk, f"{kind}\t{model}", lines, workers, **shown):
            f.write(line + "\n")
            n += 1
    return n


def remove_bpe_flag(kind: str) -> str:
    """The fairseq ``--post-process`` value that undoes the segmentation."""
    return "subword_nmt" if kind == "subword_nmt" else "sentencepiece"
