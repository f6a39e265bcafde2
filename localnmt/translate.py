"""Translate plain text with a trained checkpoint: ``localnmt-translate`` / ``python -m
localnmt.translate``.

Reads raw sentences (one a line, a file or stdin), tokenises them and applies the subword
model as the data-bin's ``localnmt_data.json`` records (jieba / janome / Moses, subword-nmt or
sentencepiece), translates them with beam search (fairseq's generator, the plugin loaded so no
``--user-dir`` is needed), and writes detokenised text, one line per input line, in order::

    localnmt-translate --data-bin W/data-bin --path ckpt/checkpoint_best.pt < input.en > out.de
    localnmt-translate --data-bin W/data-bin --path ckpt.pt --input test.en --output hyp.de \\
        [--beam 4] [--lenpen 0.6] [--max-len-a 0] [--max-len-b 200] [--max-tokens 8000] [--cpu]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from localnmt import progress
from localnmt.data.bpe import segmenter
from localnmt.data.max_positions import first_too_long, too_long_message
from localnmt.data.metadata import DataInfo, read_metadata
from localnmt.data.text_tokenize import tokenizer_for
from localnmt.data.validate import decode_lines
from localnmt.errors import DataError, entry_point
from localnmt.evaluation.postprocess import postprocess
from localnmt.evaluation.scoring import read_lines
from localnmt.provenance import check_data_bin, check_trained
from localnmt.runs.model_fit import check_vocabulary, load_failure
from localnmt.runs.options import add_options, from_options
from localnmt.runs.run_specs import DEFAULT_DECODING, DecodeSpec
from localnmt.safe_load import load_checkpoint


def prepare_source(lines: Sequence[str], info: DataInfo) -> list[str]:
    """Raw source lines → the subword sequences the model was trained on."""
    tokenize = tokenizer_for(info.src, normalize=info.normalize[info.src],
                             pretokenized=info.tokenizer[info.src] == "none")  # fmt: skip
    segment = segmenter(info.bpe, info.bpe_model[info.src])
    return [segment(tokenize(line)) for line in lines]


def finish_target(line: str, info: DataInfo) -> str:
    """A hypothesis in subwords → detokenised text (pre-tokenised corpora stay tokenised)."""
    return postprocess(line, info.tgt, info.bpe, info.detok)


def load(data_bin: Path, checkpoint: Path, cpu: bool = False) -> Any:
    """fairseq's generator interface over the checkpoint, with the data-bin's dictionaries."""
    from fairseq import checkpoint_utils, hub_utils

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    state = load_checkpoint(Path(checkpoint), mmap=True)  # missing, damaged, crafted: one line
    info = read_metadata(data_bin)
    check_vocabulary(Path(checkpoint), state, Path(data_bin), info.src, info.tgt)
    check_data_bin(Path(checkpoint), state, Path(data_bin), subword=True)  # another run's?
    check_trained(Path(checkpoint), state)  # methods added by convert_checkpoint, untrained?
    del state
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [str(checkpoint)],
            arg_overrides={"data": str(data_bin), "source_lang": info.src,
                           "target_lang": info.tgt},
        )  # fmt: skip
    except RuntimeError as err:  # torch's size mismatch: one line comparing the two
        raise load_failure(Path(checkpoint), err) from None
    hub = hub_utils.GeneratorHubInterface(cfg, task, models).eval()
    if torch.cuda.is_available() and not cpu:
        hub = hub.cuda()
    return hub


def translate_lines(
    hub: Any, lines: Sequence[str], info: DataInfo, decode: DecodeSpec = DEFAULT_DECODING
) -> list[str]:
    """Translate raw lines with beam search as ``decode`` says; empty lines stay empty.
    Output order = input order."""
    from omegaconf import open_dict

    pieces = prepare_source(lines, info)
    todo = [i for i, p in enumerate(pieces) if p.strip()]
    encoded = [hub.src_dict.encode_line(pieces[i], add_if_not_exist=False).long() for i in todo]
    limit = hub.max_positions[0] if isinstance(hub.max_positions, tuple) else hub.max_positions
    if limit is not None and (found := first_too_long([e.numel() for e in encoded], limit)):
        index, tokens = found
        raise DataError(too_long_message("input", todo[index] + 1, tokens, limit))
    with open_dict(hub.cfg):
        hub.cfg.dataset.max_tokens = decode.max_tokens
        hub.cfg.dataset.batch_size = None
    out = [""] * len(lines)
    if encoded:
        with torch.no_grad(), counted_batches(hub, len(encoded)):
            hypos = hub.generate(
                encoded,
                beam=decode.beam,
                lenpen=decode.lenpen,
                max_len_a=decode.max_len_a,
                max_len_b=decode.max_len_b,
            )
        for i, hyp in zip(todo, hypos):
            out[i] = finish_target(hub.string(hyp[0]["tokens"]), info)
    return out


@contextlib.contextmanager
def counted_batches(hub: Any, sentences: int) -> Iterator[None]:
    """A progress bar (:mod:`localnmt.progress`) over the sentences ``hub.generate`` decodes,
    advanced after each of its batches (fairseq's hub has no hook: its batch builder is
    wrapped for the block)."""
    build = hub._build_batches

    with progress.bar(total=sentences, desc="translating", unit="sent") as shown:

        def batches(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for batch in build(*args, **kwargs):
                yield batch
                shown.update(len(batch["id"]))

        hub._build_batches = batches
        try:
            yield
        finally:
            del hub._build_batches  # the class's method again


@entry_point("localnmt-translate")
def main(argv: list[str] | None = None) -> int:
    """Command line entry point: exit 0, or 2 with one message."""
    p = argparse.ArgumentParser(
        prog="localnmt-translate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data-bin",
        type=Path,
        required=True,
        help="the data-bin the model was trained on (its localnmt_data.json)",
    )
    p.add_argument("--path", type=Path, required=True, help="checkpoint")
    p.add_argument(
        "--input", default="-", help="raw source text, one sentence a line (default: stdin)"
    )
    p.add_argument("--output", default="-", help="detokenised translations (default: stdout)")
    add_options(p, DecodeSpec, exclude=("bpe", "detok"))  # those the data-bin records
    p.add_argument("--cpu", action="store_true", help="do not use the GPU")
    args = p.parse_args(argv)  # fmt: skip
    info = read_metadata(args.data_bin)
    if args.input == "-":  # the same checked decoding as a file (lines end at \n only)
        lines = list(decode_lines(sys.stdin.buffer, "<stdin>"))
    else:
        lines = read_lines(Path(args.input))
    hub = load(args.data_bin, args.path, args.cpu)
    out = translate_lines(hub, lines, info, from_options(DecodeSpec, args))
    text = "".join(line + "\n" for line in out)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
