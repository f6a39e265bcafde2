"""Train a small MarianMT model with one localnmt method on raw parallel text, score with
sacrebleu (docs/huggingface.md)::

    python -m localnmt.hf.example --data DIR --src en --tgt de --out runs/hf_marian \\
        --encoder-self 'localness[window=query]' --steps 2000

The methods are the three sites' specs (``--encoder-self``, ``--decoder-self``, ``--cross``);
those not given have none, and with none given the encoder's self-attention gets
``localness[window=query]``.

``DIR`` holds ``train.SRC``, ``train.TGT``, ``test.SRC`` and ``test.TGT``: one sentence per
line, aligned by line. A joint SentencePiece model is trained on the training text, the model
is built from a ``MarianConfig`` (no download), trained with ``Seq2SeqTrainer``, saved with
``save_pretrained`` (reload it with :func:`localnmt.hf.from_pretrained`; its SentencePiece
model is saved beside it), and its beam-search translations of the test set are scored with
sacrebleu. Under ``torchrun --nproc-per-node N -m localnmt.hf.example …`` the N processes
train together (transformers' ``Trainer``); the first one trains the SentencePiece model before
the others read it, and alone saves, translates and scores. ``OUT/score.json`` says where the
score came from (the processes and sentences per update among it): the specs, the updates, the
training loss's first and last readings, whether the run learned something
(:mod:`localnmt.evaluation.learned`) and the sha256 of every file the score depends on (the
training and test text, the SentencePiece model, the model's weights, the hypotheses). A run
that did not learn is reported as such, not with its BLEU as a result.
"""

from __future__ import annotations

import argparse
import gc
import logging
import shutil
import weakref
from pathlib import Path

import torch

from localnmt.atomic import write_json
from localnmt.digests import sha256_file
from localnmt.errors import UsageError, entry_point
from localnmt.evaluation.learned import MIN_BLEU, learned

log = logging.getLogger("localnmt.hf.example")
#: the method where no site's is given (Yang et al. 2018's query-specific window)
DEFAULT_ENCODER_SELF = "localness[window=query]"
PAD, EOS, UNK = 0, 1, 2


def read_pair(data: Path, split: str, src: str, tgt: str) -> tuple[list[str], list[str]]:
    """The aligned lines of ``split.src`` and ``split.tgt``; one error when missing or
    misaligned."""
    paths = [data / f"{split}.{lang}" for lang in (src, tgt)]
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path}: missing (--data needs train.{src}, train.{tgt}, "
                             f"test.{src}, test.{tgt})")  # fmt: skip
    sides = [path.read_text(encoding="utf-8").splitlines() for path in paths]
    if len(sides[0]) != len(sides[1]) or not sides[0]:
        raise UsageError(f"{paths[0]} and {paths[1]}: {len(sides[0])} and {len(sides[1])} "
                         "lines; they must be aligned and not empty")  # fmt: skip
    return sides[0], sides[1]


def train_sentencepiece(lines: list[str], out: Path, vocab: int):
    """A joint unigram SentencePiece model on ``lines`` (pad 0, eos 1, unk 2, no bos)."""
    import sentencepiece as spm

    text = out / "spm_train.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(out / "spm"), vocab_size=vocab, pad_id=PAD,
        eos_id=EOS, unk_id=UNK, bos_id=-1, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    return load_sentencepiece(out)


def load_sentencepiece(out: Path):
    """The SentencePiece model :func:`train_sentencepiece` wrote to ``out``."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(out / "spm.model"))


def encode(sp, lines: list[str], max_len: int) -> list[list[int]]:
    return [ids[: max_len - 1] + [EOS] for ids in sp.encode(lines)]


def build_model(vocab: int, args: argparse.Namespace):
    """A Marian model from its config, with the methods of ``args`` attached."""
    from transformers import MarianConfig, MarianMTModel

    import localnmt.hf

    config = MarianConfig(
        vocab_size=vocab, decoder_vocab_size=vocab, d_model=args.dim,
        encoder_layers=args.layers, decoder_layers=args.layers, encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads, encoder_ffn_dim=4 * args.dim,
        decoder_ffn_dim=4 * args.dim, max_position_embeddings=args.max_len + 2,
        pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, dropout=args.dropout,
        attention_dropout=args.dropout, share_encoder_decoder_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(args.seed)
    model = MarianMTModel(config)
    return localnmt.hf.apply(model, encoder_self=args.encoder_self,
                             decoder_self=args.decoder_self, cross=args.cross)  # fmt: skip


def collate(rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (−100 at padding)."""
    width = max(len(r["input_ids"]) for r in rows)
    label_width = max(len(r["labels"]) for r in rows)
    ids = torch.tensor([r["input_ids"] + [PAD] * (width - len(r["input_ids"])) for r in rows])
    labels = torch.tensor([r["labels"] + [-100] * (label_width - len(r["labels"])) for r in rows])
    return {"input_ids": ids, "attention_mask": ids.ne(PAD).long(), "labels": labels}


def translate(model, sp, lines: list[str], args: argparse.Namespace) -> list[str]:
    """Beam-search translations of ``lines``, in batches."""
    model.eval()
    out: list[str] = []
    for start in range(0, len(lines), args.batch_size):
        batch = collate([{"input_ids": ids, "labels": [EOS]}
                         for ids in encode(sp, lines[start : start + args.batch_size],
                                           args.max_len)])  # fmt: skip
        with torch.no_grad():
            hyps = model.generate(input_ids=batch["input_ids"],
                                  attention_mask=batch["attention_mask"], num_beams=args.beam,
                                  max_new_tokens=args.max_len)  # fmt: skip
        out.extend(sp.decode([[t for t in h if t > UNK] for h in hyps.tolist()]))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m localnmt.hf.example",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, required=True, help="folder of raw parallel text")
    parser.add_argument("--src", required=True, help="source suffix, e.g. en")
    parser.add_argument("--tgt", required=True, help="target suffix, e.g. de")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--encoder-self", default="", metavar="SPEC",
                        help=f"method spec of the encoder's self-attention (with none of the "
                        f"three given: {DEFAULT_ENCODER_SELF})")
    parser.add_argument("--decoder-self", default="", metavar="SPEC")
    parser.add_argument("--cross", default="", metavar="SPEC")
    parser.add_argument("--steps", type=int, default=2000, help="training updates")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="sentences per update and process (under torchrun)")  # fmt: skip
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--vocab", type=int, default=8000, help="SentencePiece vocabulary")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--max-len", type=int, default=128, help="tokens per sentence")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not (args.encoder_self or args.decoder_self or args.cross):
        # a method where none is named; naming one (say --cross) gives that one alone
        args.encoder_self = DEFAULT_ENCODER_SELF
    return args


@entry_point("localnmt.hf.example")
def main(argv: list[str] | None = None) -> float:
    """Train, save, translate the test set and print its BLEU; returns the score (NaN in
    every process but the first under torchrun)."""
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    from localnmt.attention.spec import parse_spec
    from localnmt.hf.versions import require_transformers

    args = parse_args(argv)
    require_transformers()
    for spec in (args.encoder_self, args.decoder_self, args.cross):
        parse_spec(spec)  # a bad spec: one line before any work
    train_src, train_tgt = read_pair(args.data, "train", args.src, args.tgt)
    test_src, test_tgt = read_pair(args.data, "test", args.src, args.tgt)
    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log.info("methods: encoder_self %r, decoder_self %r, cross %r", args.encoder_self,
             args.decoder_self, args.cross)  # fmt: skip
    # before anything is written: under torchrun this joins the processes (one per device)
    training = Seq2SeqTrainingArguments(
        output_dir=str(args.out / "trainer"), max_steps=args.steps,
        per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
        warmup_steps=min(400, args.steps // 10), lr_scheduler_type="inverse_sqrt",
        save_strategy="no", report_to=[], logging_steps=max(1, args.steps // 20),
        use_cpu=not torch.cuda.is_available(), seed=args.seed, disable_tqdm=True,
    )  # fmt: skip
    main_process = training.process_index == 0
    with training.main_process_first(local=False, desc="SentencePiece"):
        # the first process trains it, the others read what it wrote
        sp = (train_sentencepiece(train_src + train_tgt, args.out, args.vocab) if main_process
              else load_sentencepiece(args.out))  # fmt: skip
    model = build_model(sp.get_piece_size(), args)
    sources, targets = encode(sp, train_src, args.max_len), encode(sp, train_tgt, args.max_len)
    rows = [{"input_ids": s, "labels": t} for s, t in zip(sources, targets)]
    trainer = Seq2SeqTrainer(model=model, args=training, train_dataset=rows,
                             data_collator=collate)  # fmt: skip
    trainer.train()
    bleu = float("nan")
    # the first process saves, translates and scores while the others wait; then every
    # process leaves the process group together (one that exits while another still works
    # can abort in gloo's teardown, and torchrun then stops the other)
    with training.main_process_first(local=False, desc="saving and scoring"):
        if main_process:
            bleu = save_and_score(model, sp, trainer, test_src, test_tgt, args,
                                  processes=training.world_size)
    leave_process_group(trainer)
    return bleu


def leave_process_group(trainer) -> None:
    """Under torchrun, release the trainer's ``DistributedDataParallel`` wrapper, then destroy
    the process group (a single process: nothing to do).

    The order matters. With the wrapper alive, ``destroy_process_group`` drops the group's
    registration only, and its last reference stays with the wrapper's ``Reducer``, freed when
    ``main`` returns: that destructor holds Python's GIL while the gloo group's destructor
    joins its worker thread, and the worker, still freeing the tensors of the last collective
    (a barrier's earlier all-gathers), waits for the GIL. Both wait for ever (2 hangs in 34
    runs of two processes, seen with py-spy; none in 100 after; pytorch/pytorch#56297). Freed
    first, the ``Reducer`` leaves the group's last reference to ``destroy_process_group``, whose
    destructor releases the GIL."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    from torch.nn.parallel import DistributedDataParallel

    wrapper = trainer.model_wrapped
    wrapper = weakref.ref(wrapper) if isinstance(wrapper, DistributedDataParallel) else None
    trainer.model_wrapped = None  # the wrapper's one reference (the plain model: trainer.model)
    trainer.accelerator.free_memory()  # accelerate's (the plain model in accelerate 1.16)
    gc.collect()
    if wrapper is not None and wrapper() is not None:
        log.warning("the DistributedDataParallel wrapper is still referenced when the process "
                    "group is destroyed: leaving it may hang (torch's gloo backend)")  # fmt: skip
    torch.distributed.destroy_process_group()


def save_and_score(model, sp, trainer, test_src: list[str], test_tgt: list[str],
                   args: argparse.Namespace, processes: int = 1) -> float:  # fmt: skip
    """Save the model (its SentencePiece model beside it), translate the test set, score it,
    write ``score.json`` and print the result; returns the BLEU. ``processes``: how many
    trained together (torchrun)."""
    import sacrebleu

    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    model.save_pretrained(args.out / "model")
    shutil.copyfile(args.out / "spm.model", args.out / "model" / "spm.model")
    hyps = translate(model, sp, test_src, args)
    hypotheses = args.out / f"test.hyp.{args.tgt}"
    hypotheses.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    metric = sacrebleu.BLEU()
    bleu = metric.corpus_score(hyps, [test_tgt])
    took = learned(bleu.score, losses)
    record = score_record(args, bleu, str(metric.get_signature()), losses, took, hypotheses,
                          processes)  # fmt: skip
    write_json(args.out / "score.json", record)
    if took:
        print(f"BLEU {bleu.score:.2f}  ({bleu})")
    else:
        loss = f"{losses[0]:.3f} -> {losses[-1]:.3f}" if losses else "not logged"
        print(f"Did not learn: BLEU {bleu.score:.2f} (under {MIN_BLEU:g}) or a training loss "
              f"that did not fall ({loss}); not a result: train longer (--steps) or on more "
              "data")  # fmt: skip
    return bleu.score


def score_record(args: argparse.Namespace, bleu, signature: str, losses: list[float],
                 took: bool, hypotheses: Path, processes: int = 1) -> dict:  # fmt: skip
    """``score.json``: the score and where it came from (see the module docstring)."""
    inputs = {f"{split}.{lang}": args.data / f"{split}.{lang}"
              for split in ("train", "test") for lang in (args.src, args.tgt)}  # fmt: skip
    produced = {"spm.model": args.out / "spm.model", hypotheses.name: hypotheses}
    produced.update({f"model/{p.name}": p for p in sorted((args.out / "model").iterdir())
                     if p.suffix in (".safetensors", ".bin")})  # fmt: skip
    return {
        "bleu": round(bleu.score, 2),
        "sacrebleu": str(bleu),
        "signature": signature,
        "learned": took,
        "training_loss": {"first": losses[0] if losses else None,
                          "last": losses[-1] if losses else None, "readings": len(losses)},
        "specs": {"encoder_self": args.encoder_self, "decoder_self": args.decoder_self,
                  "cross": args.cross},
        "updates": args.steps,
        "processes": processes,
        "sentences_per_update": args.batch_size * processes,
        "seed": args.seed,
        "data": str(args.data),
        "sha256": {name: sha256_file(path) for name, path in {**inputs, **produced}.items()},
    }  # fmt: skip


if __name__ == "__main__":
    main()
