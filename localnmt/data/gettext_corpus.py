"""The embedded offline corpus: English→German / English→Chinese pairs from gettext catalogs.

Reads every ``<locale_root>/<locale>/LC_MESSAGES/*.mo`` of the pair's locales, cleans and
deduplicates the pairs (:mod:`localnmt.data.gettext_clean`), splits them by hash
(:mod:`localnmt.data.split`) into ``raw/{train,valid,test}.{en,xx}`` with a
``provenance.json``, then runs the shared processing (:mod:`localnmt.data.corpus_pipeline`).

Chinese uses ``zh_CN`` (Simplified) only: ``zh_TW`` is Traditional script, which would
double the character vocabulary, and WMT17 Zh-En is Simplified as well.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from localnmt.atomic import atomic_open, write_json
from localnmt.data.corpus_pipeline import ProcessConfig, process_corpus
from localnmt.data.gettext_clean import FILTER_ORDER, CleanConfig, clean_pairs, dedup_source
from localnmt.data.mo_reader import MoFormatError, entry_pairs, read_mo
from localnmt.data.split import hash_split
from localnmt.digests import sha256_file
from localnmt.errors import DataError
from localnmt.steps import Log, StepRunner

DEFAULT_LOCALE_ROOT = Path("/usr/share/locale")
SPLIT_SEED = "localnmt-gettext-v1"
N_VALID = 1000
N_TEST = 1000


@dataclass(frozen=True)
class PairSpec:
    """Source/target codes and the locales whose catalogs feed the target side."""

    src: str
    tgt: str
    locales: tuple[str, ...]


PAIRS: dict[str, PairSpec] = {
    "en-de": PairSpec("en", "de", ("de",)),
    "en-zh": PairSpec("en", "zh", ("zh_CN",)),
}


def pair_spec(pair: str) -> PairSpec:
    """Look up a supported pair or raise a clear error."""
    if pair not in PAIRS:
        raise DataError(f"unknown pair {pair!r}; supported: {', '.join(PAIRS)}")
    return PAIRS[pair]


def find_catalogs(locales: tuple[str, ...], root: Path) -> list[Path]:
    """All .mo files of the locales, sorted by path."""
    out: list[Path] = []
    for loc in locales:
        out.extend(sorted((root / loc / "LC_MESSAGES").glob("*.mo")))
    return out


def build_raw(
    pair: str, raw_dir: Path, *, max_train: int | None = None, locale_root: Path | None = None,
    clean: CleanConfig | None = None, log: Log = print,
) -> dict:  # fmt: skip
    """Read, clean, deduplicate and split the catalogs; write raw files and provenance.json."""
    spec = pair_spec(pair)
    root = Path(locale_root or DEFAULT_LOCALE_ROOT)
    clean = clean or CleanConfig()
    catalogs = find_catalogs(spec.locales, root)
    if not catalogs:
        raise DataError(
            f"no gettext catalogs found under {root}/{{{','.join(spec.locales)}}}/LC_MESSAGES "
            "(install language packs or pass another locale root)"
        )
    removed: Counter = Counter({k: 0 for k in FILTER_ORDER})
    kept_all: list[tuple[str, str]] = []
    cat_info = []
    for path in catalogs:
        try:
            _header, entries = read_mo(path)
        except (MoFormatError, OSError) as e:
            log(f"  warning: skipping unreadable catalog {path}: {e}")
            cat_info.append({"path": str(path), "error": str(e)})
            continue
        pairs = [p for e in entries for p in entry_pairs(e)]
        kept, rem = clean_pairs(pairs, spec.locales[0], clean)
        removed.update(rem)
        kept_all.extend(kept)
        cat_info.append({
            "path": str(path), "sha256": sha256_file(path), "entries": len(entries),
            "pairs": len(pairs), "kept_after_filters": len(kept),
        })  # fmt: skip
    log(f"  read {len(catalogs)} catalogs, {sum(c.get('pairs', 0) for c in cat_info)} pairs; "
        f"{len(kept_all)} pass the filters")  # fmt: skip
    deduped, n_dup = dedup_source(kept_all)
    splits = hash_split(deduped, n_valid=N_VALID, n_test=N_TEST, seed=SPLIT_SEED)
    n_train_full = len(splits["train"])
    if max_train is not None:
        splits["train"] = splits["train"][:max_train]
    for name, rows in splits.items():
        with atomic_open(raw_dir / f"{name}.{spec.src}") as fs:
            fs.writelines(s + "\n" for s, _ in rows)
        with atomic_open(raw_dir / f"{name}.{spec.tgt}") as ft:
            ft.writelines(t + "\n" for _, t in rows)
    prov = {
        "corpus": f"gettext-{pair}",
        "pair": pair,
        "locales": list(spec.locales),
        "locale_root": str(root),
        "catalogs": cat_info,
        "pairs_read": sum(c.get("pairs", 0) for c in cat_info),
        "filters": {
            "config": clean.to_dict(),
            "order": list(FILTER_ORDER),
            "removed": dict(removed),
        },  # fmt: skip
        "after_filters": len(kept_all),
        "dedup_source_removed": n_dup,
        "after_dedup": len(deduped),
        "split": {
            "method": "sha256(seed + tab + source), ascending; test first, then valid",
            "seed": SPLIT_SEED,
            "n_valid": N_VALID,
            "n_test": N_TEST,
            "train_before_max_train": n_train_full,
            "max_train": max_train,
        },  # fmt: skip
        "final_counts": {k: len(v) for k, v in splits.items()},
    }
    write_json(raw_dir.parent / "provenance.json", prov)
    log(f"  final counts: {prov['final_counts']}")
    return prov


def prepare_gettext_pair(
    pair: str,
    workdir: Path,
    *,
    bpe: str = "subword_nmt",
    bpe_merges: int = 8000,
    max_train: int | None = None,
    log=print,
    locale_root: Path | None = None,
    workers: int | None = None,
    normalize_target: bool = True,
) -> Path:
    """Build the gettext corpus of ``pair`` ("en-de" or "en-zh") under ``workdir``.

    Resumable: finished steps are skipped on a second call. Returns ``workdir/data-bin``
    (fairseq binaries with a joined dictionary, plus the subword model).
    ``normalize_target=False`` keeps the target side's punctuation as written.
    """
    spec = pair_spec(pair)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(locale_root or DEFAULT_LOCALE_ROOT)
    t0 = time.monotonic()
    runner = StepRunner(workdir, log)
    catalogs = find_catalogs(spec.locales, root)
    raw_dir = workdir / "raw"
    runner.run(
        "raw",
        lambda: build_raw(pair, raw_dir, max_train=max_train, locale_root=root, log=log),
        outputs=[
            raw_dir / f"{s}.{lang}"
            for s in ("train", "valid", "test")
            for lang in (spec.src, spec.tgt)
        ]
        + [workdir / "provenance.json"],  # fmt: skip
        params={
            "pair": pair,
            "max_train": max_train,
            "clean": CleanConfig().to_dict(),
            "seed": SPLIT_SEED,
            "n": [N_VALID, N_TEST],
            "catalogs": [str(p) for p in catalogs],
        },  # fmt: skip
        inputs=catalogs,  # the installed translations: an updated package rebuilds the corpus
    )
    cfg = ProcessConfig(
        src=spec.src, tgt=spec.tgt, bpe=bpe, bpe_size=bpe_merges, joint_bpe=True,
        joined_dictionary=True, workers=workers or min(2, os.cpu_count() or 1),
        normalize_target=normalize_target,
    )  # fmt: skip
    data_bin = process_corpus(raw_dir, workdir, cfg, runner, raw_step="raw", log=log)
    log(f"gettext {pair}: data-bin at {data_bin} ({time.monotonic() - t0:.1f}s; "
        f"{len(runner.ran)} steps run, {len(runner.skipped)} skipped)")  # fmt: skip
    return data_bin
