"""The results page of one task: a Markdown table (``<results-dir>/<stem>.md``) and its JSON."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localnmt.catalog import CatalogRow
from localnmt.evaluation.results import AnyScores, MultiRefScores
from localnmt.runs.reproduce.plan import Plan, References
from localnmt.runs.reproduce.reproduce_options import ReproduceOptions

if TYPE_CHECKING:
    from localnmt.runs.glue_runs import GlueTaskScore


def catalog_params(row: CatalogRow) -> int | None:
    """The row's parameter count at paper size with a 32K joined vocabulary (the catalog's
    ``#params``), counted now; None for an arch that cannot be counted."""
    from localnmt.catalog.params import count_parameters

    try:
        return count_parameters(row.arch, tuple(row.args))
    except (KeyError, SystemExit, ValueError):
        return None


def _command() -> str:
    return f"command: `scripts/reproduce.sh {shlex.join(sys.argv[1:])}`"


def write_page(opts: ReproduceOptions, plan: Plan, markdown: str, results: Sequence[Any],
               scores: dict) -> Path:  # fmt: skip
    """Write ``<stem>.md`` and ``<stem>.json`` (rows and every score) and print the page."""
    out_dir = Path(opts.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / f"{plan.stem}.md"
    page.write_text(markdown, encoding="utf-8")
    payload = {"task": plan.task.name, "rows": [r.to_json() for r in results], "scores": scores}
    (out_dir / f"{plan.stem}.json").write_text(
        json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    print(markdown)
    return page


def translation_page(
    opts: ReproduceOptions,
    plan: Plan,
    baselines: dict[str, CatalogRow],
    scores: dict[str, AnyScores],
    logs: dict,
    *,
    data: Path,
    refs: References,
    separate: bool,
    first: str,
    seconds: float,
) -> Path:
    """BLEU, Δ and significance per row (4-reference averages for NIST)."""
    from localnmt.runs.reproduce.results_markdown import (
        LEGEND,
        LEGEND_MULTI_REF,
        RowResult,
        results_markdown,
    )

    multi = plan.refs is not None
    results = []
    for row in plan.rows:
        s, log = scores[row.name], logs[row.name]
        is_base = baselines[row.name].name == row.name
        common = dict(
            name=row.name, row=row.row, params=log.params, catalog_params=catalog_params(row),
            ups=log.ups, wps=log.wps, is_baseline=is_base,
            training=s.training,
        )  # fmt: skip
        if isinstance(s, MultiRefScores):
            base_avg = scores[baselines[row.name].name].bleu
            sets = {k: v.score for k, v in s.sets.items()}
            delta = None if is_base else s.average - base_avg
            results.append(RowResult(bleu=s.average, delta=delta, sets=sets, **common))
            continue
        boot = s.bootstrap
        results.append(
            RowResult(
                bleu=s.bleu,
                tok_bleu=s.tokenized_bleu.score,
                delta=boot.delta if boot else None,
                marker=boot.marker if boot else "",
                p_value=boot.p_value if boot else None,
                **common,
            )
        )
    head = scores[first]
    recipe = "tiny (smoke test, not comparable to the paper)" if opts.tiny else "paper sizes"
    batch = plan.task.tokens_per_update or "8 x 4096 (recipe)"
    notes = [f"task: {plan.task.label} ({plan.task.name}); subset: {plan.subset}"]
    notes += plan.notes + refs.notes
    if isinstance(head, MultiRefScores):
        notes += [
            f"data: `{data}`; references: `{plan.refs}` ({len(head.sets)} sets, "
            "4 references each, lower-cased)",
            "significance: no test for the 4-reference average; single-reference (ref0) "
            "paired bootstrap per set in the JSON",
            f"SacreBLEU signature: `{head.signature}`",
        ]
    else:
        notes += [
            f"data: `{data}`; references: {head.scored.references if head.scored else None}",
            f"SacreBLEU signature: `{head.signature}`",
        ]
    notes += [
        f"recipe: {recipe}; tokens per update: {batch}"
        + ("; separate vocabularies (decoder embeddings shared)" if separate else "")
        + f"; updates: {', '.join(f'{n}={logs[n].num_updates}' for n in logs)}",
        f"wall time: {seconds:.0f} s",
        _command(),
    ]
    title = f"{opts.paper} {opts.table}, {plan.task.label}"
    legend = LEGEND_MULTI_REF if multi else LEGEND
    return write_page(opts, plan, results_markdown(title, results, notes, legend), results,
                      {name: s.to_json() for name, s in scores.items()})  # fmt: skip


def glue_page(
    opts: ReproduceOptions,
    plan: Plan,
    baselines: dict[str, CatalogRow],
    scores: dict[str, dict[str, GlueTaskScore]],
    params: dict[str, int | None],
    *,
    seconds: float,
) -> Path:
    """Dev accuracy per GLUE task and row (Pande et al. Table 4)."""
    from localnmt.runs.glue_runs import setting_text
    from localnmt.runs.reproduce.results_markdown import GlueResult, glue_markdown

    tasks = list(opts.glue_tasks)
    results = [
        GlueResult(
            name=r.name,
            row=r.row,
            accuracy={t: s.accuracy if (s := scores[r.name].get(t)) else None for t in tasks},
            params=params[r.name],
            is_baseline=baselines[r.name].name == r.name,
        )
        for r in plan.rows
    ]
    setting = setting_text(opts.glue_grid)
    if opts.tiny:
        setting = "batch 8, 3 updates"
    recipe = "tiny (smoke test, not comparable to the paper)" if opts.tiny else "paper sizes"
    notes = [
        f"task: {plan.task.label}; data: `{plan.data}` (pretrain/ and one folder per task)",
        f"pre-training: localnmt.runs.roberta_pretrain; fine-tuning: localnmt.runs.glue_finetune, "
        f"{setting}; recipe: {recipe}",
        f"wall time: {seconds:.0f} s",
        _command(),
    ]
    title = f"{opts.paper} {opts.table}, {plan.task.label}"
    payload = {name: {t: s.to_json() for t, s in row.items()} for name, row in scores.items()}
    return write_page(opts, plan, glue_markdown(title, results, tasks, notes), results, payload)
