"""In-process train → save → reload → generate → score, for tests and smoke runs.

fairseq's own test helpers are not in its wheels; this is the small equivalent. Everything
runs through fairseq's real entry points (``fairseq_cli.preprocess/train/generate``) with
``--user-dir`` pointing at this package, so the code path is the one users run.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path

from localnmt.paths import PLUGIN_DIR

#: Tiny model dimensions: override the size of any architecture on the command line.
TINY_DIMS = [
    "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
    "--encoder-layers", "2", "--encoder-attention-heads", "4",
    "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64",
    "--decoder-layers", "2", "--decoder-attention-heads", "4",
]  # fmt: skip


def make_tiny_corpus(folder: Path, *, train: int = 300, valid: int = 24, seed: int = 1) -> Path:
    """A synthetic word-for-word "translation" task that a tiny model learns in seconds:
    source words from a 24-word vocabulary, target = a fixed word mapping, reversed in pairs
    so that attention must look at neighbours. Writes raw ``{train,valid,test}.{src,tgt}``."""
    rng = random.Random(seed)
    src_vocab = [f"s{i}" for i in range(24)]
    mapping = {w: f"t{i}" for i, w in enumerate(src_vocab)}
    folder.mkdir(parents=True, exist_ok=True)

    def pair() -> tuple[str, str]:
        words = [rng.choice(src_vocab) for _ in range(rng.randint(3, 14))]
        tgt = [mapping[w] for w in words]
        for i in range(0, len(tgt) - 1, 2):
            tgt[i], tgt[i + 1] = tgt[i + 1], tgt[i]
        return " ".join(words), " ".join(tgt)

    for split, count in (("train", train), ("valid", valid), ("test", valid)):
        pairs = [pair() for _ in range(count)]
        (folder / f"{split}.src").write_text("\n".join(p[0] for p in pairs) + "\n")
        (folder / f"{split}.tgt").write_text("\n".join(p[1] for p in pairs) + "\n")
    return folder


def preprocess(raw: Path, dest: Path, src: str = "src", tgt: str = "tgt") -> Path:
    """``fairseq-preprocess`` with a joined dictionary, in process."""
    from fairseq import options
    from fairseq_cli import preprocess as fairseq_preprocess

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    parser = options.get_preprocessing_parser()
    args = parser.parse_args(
        [
            "--source-lang",
            src,
            "--target-lang",
            tgt,
            "--trainpref",
            str(raw / "train"),
            "--validpref",
            str(raw / "valid"),
            "--testpref",
            str(raw / "test"),
            "--destdir",
            str(dest),
            "--joined-dictionary",
            "--workers",
            "1",
        ]  # fmt: skip
    )
    with _quiet():
        fairseq_preprocess.main(args)
    return dest


@dataclass
class TrainResult:
    save_dir: Path
    losses: list[float]  # training loss per logged update

    @property
    def checkpoint(self) -> Path:
        return self.save_dir / "checkpoint_last.pt"


def train(
    data: Path,
    save_dir: Path,
    arch: str,
    extra: list[str] | None = None,
    *,
    max_update: int = 30,
    lr: float = 3e-3,
    seed: int = 1,
    dims: list[str] | None = None,
) -> TrainResult:
    """``fairseq-train`` in process; returns the per-update training losses.

    ``dims`` are the size flags (default :data:`TINY_DIMS`; ``[]`` keeps the arch's sizes)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import train as fairseq_train

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    argv = [
        str(data), "--user-dir", str(PLUGIN_DIR), "--arch", arch,
        "--task", "translation", "--optimizer", "adam", "--lr", str(lr),
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "5",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--max-tokens", "1000", "--max-update", str(max_update), "--seed", str(seed),
        "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--no-progress-bar",
        "--log-format", "json", "--log-interval", "1", "--num-workers", "0",
        "--dropout", "0.0", "--share-all-embeddings", "--cpu", "--disable-validation",
        *(TINY_DIMS if dims is None else dims), *(extra or []),
    ]  # fmt: skip
    from localnmt.runs import checkpoint_files

    checkpoint_files.install()  # atomic saves, stamped with their provenance, as users get
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(args)
    records = _LogCapture()
    with records.attached(), _quiet():
        fairseq_train.main(cfg)
    return TrainResult(save_dir, records.losses())


@dataclass
class GenerateResult:
    hypotheses: list[str]  # detokenised, in corpus order
    references: list[str]
    bleu: float
    log: str


def generate(
    data: Path,
    checkpoint: Path,
    *,
    beam: int | None = None,
    lenpen: float | None = None,
    subset: str = "test",
    extra: list[str] | None = None,
) -> GenerateResult:
    """``fairseq-generate`` in process, scored with SacreBLEU: beam search as the papers ran it
    (:data:`~localnmt.runs.run_specs.DEFAULT_DECODING`: beam 4, length penalty 0.6), unless
    ``beam`` or ``lenpen`` say otherwise."""
    from localnmt.runs.run_specs import DEFAULT_DECODING

    beam = DEFAULT_DECODING.beam if beam is None else beam
    lenpen = DEFAULT_DECODING.lenpen if lenpen is None else lenpen
    import sacrebleu
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import generate as fairseq_generate

    import localnmt.fairseq_plugin  # noqa: F401  (registers the models with fairseq)

    argv = [
        str(data), "--user-dir", str(PLUGIN_DIR), "--path", str(checkpoint),
        "--task", "translation", "--gen-subset", subset, "--beam", str(beam),
        "--lenpen", str(lenpen),
        "--batch-size", "24", "--required-batch-size-multiple", "1",
        "--cpu", "--num-workers", "0", *(extra or []),
    ]  # fmt: skip
    parser = options.get_generation_parser()
    args = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(args)
    buffer = io.StringIO()
    with _quiet(), contextlib.redirect_stdout(buffer):
        fairseq_generate.main(cfg)
    log = buffer.getvalue()
    hyps: dict[int, str] = {}
    refs: dict[int, str] = {}
    for line in log.splitlines():
        if m := re.match(r"^H-(\d+)\t[^\t]*\t(.*)$", line):
            hyps[int(m.group(1))] = m.group(2)
        elif m := re.match(r"^T-(\d+)\t(.*)$", line):
            refs[int(m.group(1))] = m.group(2)
    order = sorted(refs)
    hypotheses = [hyps.get(i, "") for i in order]
    references = [refs[i] for i in order]
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    return GenerateResult(hypotheses, references, bleu, log)


class _LogCapture(logging.Handler):
    """Collects fairseq's JSON training-log records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    @contextlib.contextmanager
    def attached(self):
        root = logging.getLogger()
        root.addHandler(self)
        old = root.level
        root.setLevel(logging.INFO)
        try:
            yield self
        finally:
            root.removeHandler(self)
            root.setLevel(old)

    def losses(self) -> list[float]:
        out = []
        for message in self.messages:
            start = message.find("{")
            if start < 0:
                continue
            try:
                stats = json.loads(message[start:])
            except json.JSONDecodeError:
                continue
            if (
                isinstance(stats, dict)
                and "train_inner" in json.dumps(stats)
                or (isinstance(stats, dict) and "loss" in stats and "num_updates" in stats)
            ):
                loss = stats.get("loss", stats.get("train_inner_loss"))
                if loss is not None:
                    out.append(float(loss))
        return out


@contextlib.contextmanager
def _quiet():
    """Silence fairseq's console handlers (records still reach attached handlers)."""
    stream_handlers = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, _LogCapture)
    ]
    for h in stream_handlers:
        h.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for h in stream_handlers:
            h.setLevel(logging.NOTSET)


def exit_status(main, argv: list[str]) -> int:
    """The status a command's ``main`` exits with (0 when it returns)."""
    try:
        main(argv)
    except SystemExit as done:
        return done.code
    return 0
