"""Shared processing: raw parallel text → tokenised → (cleaned) → subwords → data-bin.

Used by the gettext corpus and the WMT pipelines alike. Every step is resumable through
:class:`~localnmt.data.steps.StepRunner`; nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from localnmt.data import bpe as bpe_mod
from localnmt.data.binarize import binarize
from localnmt.data.length_clean import clean_corpus
from localnmt.data.steps import DataError, Log, StepRunner, write_json
from localnmt.data.text_tokenize import tokenize_file
from localnmt.data.validate import validate_parallel


@dataclass(frozen=True)
class LengthClean:
    """Moses-style length filter on the training set, after tokenisation or after BPE."""

    min_len: int = 1
    max_len: int = 250
    ratio: float = 1.5
    stage: str = "bpe"  # "tok" or "bpe"


@dataclass(frozen=True)
class ProcessConfig:
    """What to do with a raw corpus ``raw/{train,valid,<tests>}.{src,tgt}``."""

    src: str
    tgt: str
    bpe: str = "subword_nmt"
    bpe_size: int = 8000  # merges (subword_nmt) or vocabulary size (sentencepiece)
    joint_bpe: bool = True
    joined_dictionary: bool = True
    length_clean: LengthClean | None = None
    tests: tuple[str, ...] = ("test",)
    workers: int = 2
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _splits(cfg: ProcessConfig) -> tuple[str, ...]:
    return ("train", "valid", *cfg.tests)


def process_corpus(
    raw_dir: Path, workdir: Path, cfg: ProcessConfig, runner: StepRunner, *,
    raw_step: str | None = None, log: Log = print,
) -> Path:  # fmt: skip
    """Run all processing steps; return the ``data-bin`` directory."""
    bpe_mod.model_filename(cfg.bpe)  # validates the option early
    raw_dir, workdir = Path(raw_dir), Path(workdir)
    langs = (cfg.src, cfg.tgt)
    deps = (raw_step,) if raw_step else ()
    splits = _splits(cfg)

    def raw(split: str, lang: str) -> Path:
        return raw_dir / f"{split}.{lang}"

    sizes = {f"{s}.{l}": raw(s, l).stat().st_size for s in splits for l in langs
             if raw(s, l).exists()}  # fmt: skip

    def do_validate() -> None:
        for s in splits:
            n = validate_parallel(raw(s, cfg.src), raw(s, cfg.tgt))
            log(f"  {s}: {n} lines OK")

    runner.run("validate", do_validate, outputs=[], params={"sizes": sizes}, deps=deps)

    tok_dir, bpe_dir = workdir / "tok", workdir / "bpe"
    for s in splits:
        for lang in langs:
            runner.run(
                f"tokenize.{s}.{lang}",
                lambda s=s, lang=lang: log(
                    f"  {tokenize_file(raw(s, lang), tok_dir / f'{s}.{lang}', lang, cfg.workers)}"
                    " lines"
                ),
                outputs=[tok_dir / f"{s}.{lang}"],
                params={"lang": lang},
                deps=("validate",),
            )
    tok_deps = tuple(f"tokenize.{s}.{lang}" for s in splits for lang in langs)

    lc = cfg.length_clean
    train_tok = tok_dir / "train"
    if lc is not None and lc.stage == "tok":
        train_tok = _clean_step(runner, tok_dir, "train", "train.clean", cfg, tok_deps, log)
        tok_deps = (*tok_deps, "clean.tok")

    # learn subwords on (cleaned) train only
    if cfg.joint_bpe:
        models = {lang: bpe_dir / bpe_mod.model_filename(cfg.bpe) for lang in langs}
        learn_sets = {models[cfg.src]: [Path(f"{train_tok}.{lang}") for lang in langs]}
    else:
        models = {lang: bpe_dir / bpe_mod.model_filename(cfg.bpe, f"bpe.{lang}") for lang in langs}
        learn_sets = {models[lang]: [Path(f"{train_tok}.{lang}")] for lang in langs}
    for model, files in learn_sets.items():
        runner.run(
            f"bpe.learn.{model.stem}",
            lambda model=model, files=files: bpe_mod.learn(
                cfg.bpe, files, model, cfg.bpe_size, cfg.workers
            ),
            outputs=[model],
            params={"kind": cfg.bpe, "size": cfg.bpe_size, "files": [f.name for f in files]},
            deps=tok_deps,
        )
    learn_deps = tuple(f"bpe.learn.{m.stem}" for m in learn_sets)

    for s in splits:
        inp_prefix = train_tok if s == "train" else tok_dir / s
        for lang in langs:
            out = bpe_dir / f"{s}.{lang}"
            runner.run(
                f"bpe.apply.{s}.{lang}",
                lambda inp=Path(f"{inp_prefix}.{lang}"), out=out, lang=lang: bpe_mod.apply_file(
                    cfg.bpe, models[lang], inp, out, cfg.workers
                ),
                outputs=[out],
                params={"kind": cfg.bpe},
                deps=learn_deps,
            )
    bpe_deps = tuple(f"bpe.apply.{s}.{lang}" for s in splits for lang in langs)

    train_bpe = bpe_dir / "train"
    if lc is not None and lc.stage == "bpe":
        train_bpe = _clean_step(runner, bpe_dir, "train", "train.clean", cfg, bpe_deps, log)
        bpe_deps = (*bpe_deps, "clean.bpe")
    elif lc is not None and lc.stage != "tok":
        raise DataError(f"length_clean.stage must be 'tok' or 'bpe', not {lc.stage!r}")

    data_bin = workdir / "data-bin"
    runner.run(
        "binarize",
        lambda: _binarize(cfg, train_bpe, bpe_dir, data_bin, models, log),
        outputs=[
            data_bin / f"dict.{cfg.src}.txt",
            data_bin / f"train.{cfg.src}-{cfg.tgt}.{cfg.src}.bin",
        ],
        params={"joined": cfg.joined_dictionary, "tests": cfg.tests},
        deps=bpe_deps,
    )
    return data_bin


def _clean_step(runner, d: Path, inp: str, out: str, cfg: ProcessConfig, deps, log) -> Path:
    lc = cfg.length_clean
    assert lc is not None

    def go() -> None:
        n, kept = clean_corpus(
            d / f"{inp}.{cfg.src}", d / f"{inp}.{cfg.tgt}",
            d / f"{out}.{cfg.src}", d / f"{out}.{cfg.tgt}",
            min_len=lc.min_len, max_len=lc.max_len, ratio=lc.ratio,
        )  # fmt: skip
        log(f"  length clean ({lc.stage}): kept {kept} of {n} lines")
        write_json(d / f"{out}.stats.json", {"read": n, "kept": kept, **asdict(lc)})

    runner.run(
        f"clean.{lc.stage}",
        go,
        outputs=[d / f"{out}.{cfg.src}", d / f"{out}.{cfg.tgt}"],
        params=asdict(lc),
        deps=deps,
    )
    return d / out


def _binarize(cfg: ProcessConfig, train: Path, bpe_dir: Path, dest: Path, models, log) -> None:
    binarize(
        train, bpe_dir / "valid", [bpe_dir / t for t in cfg.tests], dest, cfg.src, cfg.tgt,
        joined_dictionary=cfg.joined_dictionary, workers=cfg.workers, log=log,
    )  # fmt: skip
    for model in set(models.values()):  # keep the subword model(s) beside the binaries
        target = dest / model.name
        if not target.exists():
            target.write_bytes(model.read_bytes())
    write_json(
        dest / "localnmt_data.json",
        {"bpe": cfg.bpe, "post_process": bpe_mod.remove_bpe_flag(cfg.bpe), "config": cfg.to_dict()},
    )
