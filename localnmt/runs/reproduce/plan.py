"""Planning: which tasks of a table run, on which data, scored against which references.

Nothing trains here; every check that can stop a run (no data, no references) happens
before the first row starts, as one message with exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from localnmt.catalog import CatalogRow
from localnmt.catalog.tables import table_id
from localnmt.catalog.tasks import DEFAULT_TASK, TASKS, Task
from localnmt.data.corpus_layout import raw_file
from localnmt.errors import UsageError
from localnmt.runs.reproduce.reproduce_options import ReproduceOptions


@dataclass
class Plan:
    """What runs for one task of the table: rows, data, scoring."""

    task: Task
    rows: list[CatalogRow]
    #: data-bin (GLUE: the data folder); None: build the gettext corpus (--tiny)
    data: Path | None
    stem: str
    subset: str = "test"
    refs: Path | None = None  # NIST references (refs/subsets.json)
    notes: list[str] = field(default_factory=list)
    pair: str = "en-de"  # the gettext pair built when ``data`` is None


@dataclass
class References:
    """The raw text a translation task is scored against (None: fairseq's own lines)."""

    ref: Path | None
    src: Path | None
    notes: list[str] = field(default_factory=list)


def choose_tasks(
    groups: dict[str, list[CatalogRow]], requested: str | None, title: str
) -> list[str]:
    """The tasks to run: ``--task`` (a name or ``all``), else the table's first task."""
    names = list(groups)
    listing = ", ".join(f"{n} ({TASKS[n].label}, {len(groups[n])} rows)" for n in names)
    if requested == "all":
        return names
    if requested:
        if requested not in groups:
            raise UsageError(f"{title} has no rows of task '{requested}'; its tasks: {listing}")
        return [requested]
    if len(names) > 1:
        print(
            f"{title} has rows of {len(names)} tasks: {listing}.\n"
            f"Running {names[0]}; choose with --task NAME, or --task all for every column.",
            flush=True,
        )
    return names[:1]


def page_stem(paper: str, table: str, task: str) -> str:
    """``yang2018_table4`` (WMT14 En-De) or ``yang2018_table4_wmt17_zh_en``."""
    stem = f"{paper}_{table_id(table)}"
    return stem if task == DEFAULT_TASK else f"{stem}_{task}"


def is_data_bin(path: Path) -> bool:
    """A folder with fairseq dictionaries."""
    return path.is_dir() and any(path.glob("dict.*.txt"))


def separate_vocab(data: Path) -> bool:
    """True when the data-bin's source and target dictionaries differ (no shared embeddings)."""
    return len({p.read_bytes() for p in Path(data).glob("dict.*.txt")}) > 1


def _missing(task: Task, opts: ReproduceOptions, what: str) -> UsageError:
    tiny = "" if not task.is_translation else (
        " (or --tiny for a smoke test on the embedded gettext corpus)"
    )  # fmt: skip
    return UsageError(
        f"no data for {task.label} ({task.name}): {what}.\n"
        f"Build it with:\n  {task.prep_command(opts.data_root)}\n"
        f"then rerun, or pass --data DIR{tiny}. Nothing was trained."
    )


def references(data: Path, subset: str, opts: ReproduceOptions) -> References:
    """Raw references and sources of ``subset``: ``--ref``/``--src``, else
    ``<data-bin>/../raw/<subset>.<lang>`` (:func:`localnmt.data.corpus_layout.raw_file`).

    A missing reference stops the run (exit 2) unless ``--score-against-targets`` asks to
    score against fairseq's post-processed target lines, which is then noted on the page."""
    from localnmt.runs.generate import infer_langs

    src_lang, tgt_lang = infer_langs(data, subset)
    ref = Path(opts.ref) if opts.ref else raw_file(data, subset, tgt_lang)
    src = Path(opts.src) if opts.src else raw_file(data, subset, src_lang)
    out = References(ref, src)
    if not ref.is_file():
        if not opts.score_against_targets:
            raise UsageError(
                f"no raw references {ref} for subset {subset}: BLEU is scored against the raw "
                "text the data-prep step keeps beside the data-bin. Pass --ref FILE, rebuild the "
                "data with a data_prep/ script, or --score-against-targets to score against "
                "fairseq's post-processed targets (not comparable to published SacreBLEU). "
                "Nothing was trained."
            )
        out.ref = None
        out.notes.append(
            f"references: fairseq's post-processed targets (--score-against-targets; {ref} "
            "missing): not comparable to SacreBLEU against raw text"
        )
        print(f"note: {out.notes[-1]}", flush=True)
    if not src.is_file():
        if opts.src:
            raise UsageError(f"--src {src} does not exist")
        out.src = None
        out.notes.append(f"sources for length buckets: fairseq's source lines ({src} missing)")
    return out


def plan_task(
    task_name: str, rows: list[CatalogRow], opts: ReproduceOptions, *, check: bool = True
) -> Plan:
    """Rows, data and scoring of one task; with ``check``, stops (:class:`UsageError`, exit 2)
    when the data or its references are missing, before anything runs."""
    task = TASKS[task_name]
    plan = Plan(task, rows, None, page_stem(opts.paper, opts.table, task_name))
    plan.subset = opts.subset or rows[0].split
    default = task.default_data(opts.data_root)
    if task.is_translation:
        default_exists = is_data_bin(default)
    else:
        default_exists = (default / "pretrain").is_dir()
    if opts.data:
        plan.data = Path(opts.data)
    elif default_exists and not opts.pair:
        plan.data = default
    elif (opts.tiny or opts.pair) and task.is_translation:
        plan.data = None  # the embedded gettext corpus (options stay as given: the next task
        plan.pair = opts.pair or "en-de"  # of --task all still finds its own data)
        plan.notes.append(f"data: embedded gettext corpus {plan.pair} (no {task.label} data)")
    elif check:
        raise _missing(task, opts, f"{default} does not exist")
    else:
        plan.data = default
        plan.notes.append(f"{default} does not exist yet: {task.prep_command(opts.data_root)}")
    if not task.is_translation:
        from localnmt.runs.glue_runs import missing_data

        missing = missing_data(plan.data, tuple(opts.glue_tasks))
        if missing and check:
            raise _missing(task, opts, f"{plan.data} lacks {', '.join(missing)}")
        return plan
    if check and plan.data is not None and not plan.data.is_dir():
        raise _missing(task, opts, f"{plan.data} does not exist")
    if task.scoring == "nist_multi_ref" and plan.subset == "test":
        refs = Path(opts.refs_dir) if opts.refs_dir else None
        if refs is None and plan.data is not None:
            from localnmt.runs.nist_eval import refs_dir_for

            refs = refs_dir_for(plan.data)
        if refs is not None and (refs / "subsets.json").is_file():
            plan.refs = refs
            return plan
        if not check and plan.data is not None and not plan.data.exists():
            plan.refs = refs  # dry run before the data is built: where they will be
            return plan
        if not (opts.tiny or not check):
            raise _missing(task, opts, f"no references {refs}/subsets.json for 4-reference BLEU")
        plan.notes.append(
            "single-reference BLEU on subset test: no NIST references "
            "(refs/subsets.json) next to the data"
        )
    return plan


def check_references(plan: Plan, opts: ReproduceOptions) -> None:
    """Stop (exit 2) now, before any training, when a translation plan's data-bin lacks the
    subset to score or its raw references (the gettext corpus is checked once built)."""
    if not plan.task.is_translation or plan.data is None or plan.refs is not None:
        return
    if not is_data_bin(plan.data):
        raise _missing(plan.task, opts, f"{plan.data} has no dict.*.txt (no fairseq data-bin)")
    if not any(plan.data.glob(f"{plan.subset}.*-*.*.idx")):
        raise UsageError(
            f"{plan.data} has no subset {plan.subset!r} ({plan.subset}.<src>-<tgt>.*.idx); "
            "choose another with --subset. Nothing was trained."
        )
    references(plan.data, plan.subset, opts)


def prepare_data(opts: ReproduceOptions, plan: Plan) -> tuple[Path, References]:
    """Data-bin (building the gettext corpus if the plan has none) and its raw references."""
    if plan.data is not None:
        data = plan.data
    else:
        from localnmt.data.gettext_corpus import prepare_gettext_pair

        max_train = opts.max_train or (5000 if opts.tiny else None)
        data = prepare_gettext_pair(
            plan.pair,
            Path(opts.workdir) / "data" / plan.pair,
            bpe_merges=opts.bpe_merges or (2000 if opts.tiny else 8000),
            max_train=max_train,
        )
    if plan.refs is not None:  # NIST: 4 references per set, read by nist_eval
        return Path(data), References(None, None)
    return Path(data), references(Path(data), plan.subset, opts)


def row_size(row: CatalogRow, opts: ReproduceOptions) -> str:
    """The recipe of a row: ``tiny`` with ``--tiny``, else the row's size."""
    return "tiny" if opts.tiny else row.size
