"""Shared processing: raw parallel text → tokenised → (cleaned) → subwords → data-bin.

Used by the gettext corpus and the WMT pipelines alike. Every step is resumable through
:class:`~localnmt.steps.StepRunner`; nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from localnmt.atomic import atomic_open, write_json
from localnmt.data import bpe as bpe_mod
from localnmt.data.binarize import binarize
from localnmt.data.corpus_layout import raw_dir as layout_raw_dir
from localnmt.data.length_clean import clean_corpus
from localnmt.data.max_positions import DEFAULT_MAX_POSITIONS, flag_long_lines
from localnmt.data.text_tokenize import tokenize_file, tokenizer_name
from localnmt.data.validate import iter_lines_checked, validate_parallel
from localnmt.errors import DataError
from localnmt.steps import Log, StepRunner


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
    pretokenized: bool = False  # input already tokenised: only control characters/spaces cleaned
    normalize_target: bool = True  # Moses punctuation normalisation of the target side
    max_positions: int = DEFAULT_MAX_POSITIONS  # flag valid/test lines longer (0: no check)

    def to_dict(self) -> dict:
        return asdict(self)

    def normalizes(self, lang: str) -> bool:
        """Whether ``lang``'s side gets Moses punctuation normalisation."""
        if self.pretokenized or tokenizer_name(lang) != "moses":
            return False
        return self.normalize_target or lang != self.tgt


def _splits(cfg: ProcessConfig) -> tuple[str, ...]:
    return ("train", "valid", *cfg.tests)


def subset_names(tests: tuple[str, ...]) -> dict[str, str]:
    """fairseq's subset name of each test set, in order: ``test``, ``test1``, ``test2``, ..."""
    return {("test" if i == 0 else f"test{i}"): t for i, t in enumerate(tests)}


def _tok_params(cfg: ProcessConfig, lang: str) -> dict:
    """Tokenisation step parameters (only non-default options are added, so the fingerprints
    of corpora prepared before these options existed stay valid)."""
    params: dict = {"lang": lang}
    if cfg.pretokenized:
        params["pretokenized"] = True
    elif tokenizer_name(lang) == "moses" and not cfg.normalizes(lang):
        params["normalize"] = False
    return params


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

    files = [raw(s, lang) for s in splits for lang in langs if raw(s, lang).exists()]

    def do_validate() -> None:
        for s in splits:
            n = validate_parallel(raw(s, cfg.src), raw(s, cfg.tgt))
            log(f"  {s}: {n} lines OK")

    runner.run("validate", do_validate, outputs=[], inputs=files,
               params={"files": [f.name for f in files]}, deps=deps)  # fmt: skip

    tok_dir, bpe_dir = workdir / "tok", workdir / "bpe"

    def tokenize(s: str, lang: str) -> None:
        n = tokenize_file(
            raw(s, lang), tok_dir / f"{s}.{lang}", lang, cfg.workers,
            normalize=cfg.normalizes(lang), pretokenized=cfg.pretokenized,
        )  # fmt: skip
        log(f"  {n} lines")

    for s in splits:
        for lang in langs:
            runner.run(
                f"tokenize.{s}.{lang}",
                lambda s=s, lang=lang: tokenize(s, lang),
                outputs=[tok_dir / f"{s}.{lang}"],
                params=_tok_params(cfg, lang),
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
    # valid and test lines are all kept: flag those a model cannot take, before training
    kept_whole = [bpe_dir / f"{s}.{lang}" for s in splits if s != "train" for lang in langs]
    flag_long_lines(kept_whole, cfg.max_positions, log)

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
    _raw_subsets_step(runner, raw, data_bin, cfg, log)
    return data_bin


def _raw_subsets_step(runner: StepRunner, raw, data_bin: Path, cfg: ProcessConfig, log) -> None:
    """Raw text of every test set under its data-bin subset name (``raw/test1.de`` for the
    second test set, see :mod:`localnmt.data.corpus_layout`), copied when the pipeline named it
    otherwise (``test_filtered``, ``test2018``, ``mt04``), so scoring finds it by subset."""
    dest = layout_raw_dir(data_bin)
    todo = {
        (subset, lang): raw(name, lang)
        for subset, name in subset_names(cfg.tests).items()
        for lang in (cfg.src, cfg.tgt)
        if raw(name, lang).resolve() != (dest / f"{subset}.{lang}").resolve()
    }
    clash = sorted({s for (s, _l) in todo} & set(cfg.tests))
    if clash:
        raise DataError(f"test set names {cfg.tests} reuse a subset name at another position "
                        f"({', '.join(clash)}); rename the test sets")  # fmt: skip
    if not todo:
        return

    def copy() -> None:
        for (subset, lang), src in todo.items():
            n = 0
            with atomic_open(dest / f"{subset}.{lang}") as f:
                for line in iter_lines_checked(src):
                    f.write(line + "\n")
                    n += 1
            log(f"  raw/{subset}.{lang} <- {src.name} ({n} lines)")

    runner.run(
        "raw.subsets",
        copy,
        outputs=[dest / f"{subset}.{lang}" for subset, lang in todo],
        params={f"{s}.{lang}": str(p) for (s, lang), p in todo.items()},
        deps=("validate",),
    )


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
    write_json(dest / "localnmt_data.json", metadata(cfg, models))


def metadata(cfg: ProcessConfig, models: dict[str, Path]) -> dict:
    """What a translation or scoring command needs later, kept as the data-bin's
    ``localnmt_data.json``: languages, tokeniser and normalisation per language, the subword
    kind and model file (in the data-bin) per language, and the test sets' subset names."""
    langs = (cfg.src, cfg.tgt)
    return {
        "bpe": cfg.bpe,
        "post_process": bpe_mod.remove_bpe_flag(cfg.bpe),
        "src": cfg.src,
        "tgt": cfg.tgt,
        "tokenizer": {lang: tokenizer_name(lang, cfg.pretokenized) for lang in langs},
        "normalize": {lang: cfg.normalizes(lang) for lang in langs},
        "bpe_model": {lang: models[lang].name for lang in langs},
        "subsets": subset_names(cfg.tests),
        "config": cfg.to_dict(),
    }
