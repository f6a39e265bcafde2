"""Catalog rows of one paper table, their tasks, and which row is that table's baseline."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

PLAIN_ARCHS = {
    "localnmt_base",
    "localnmt_big",
    "transformer",
    "transformer_wmt_en_de",
    "transformer_vaswani_wmt_en_de_big",
    "localnmt_roberta_base",  # BERT-base, the reference of Pande et al. Table 4
}
_BASELINE_LABEL = re.compile(r"^(baseline|transformer([ -_]?(base|big))?)\b", re.IGNORECASE)


def load_catalog(catalog_json: Path | None = None) -> list[dict]:
    """Rows from a JSON file, or from ``python -m localnmt.catalog --json``."""
    if catalog_json is not None:
        return json.loads(Path(catalog_json).read_text())
    out = subprocess.run(
        [sys.executable, "-m", "localnmt.catalog", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out[out.index("[") :])


def table_key(table: str) -> str:
    """``"Table 2"``, ``"table2"`` and ``"2"`` all become ``"2"``."""
    match = re.search(r"\d+\w*", str(table))
    return match.group(0).lower() if match else str(table).strip().lower()


def table_id(table: str) -> str:
    """``"Table 2"``, ``"table2"``, ``"2"`` → ``"table2"``; ``"Figure 2a"``, ``"fig2a"`` →
    ``"figure2a"`` (a table and a figure with the same number are different selections)."""
    kind = "figure" if str(table).strip().lower().startswith("fig") else "table"
    return f"{kind}{table_key(table)}"


def select_rows(rows: list[dict], paper: str, table: str) -> list[dict]:
    """Rows of one paper and table (or figure), in catalog order."""
    key = table_id(table)
    return [r for r in rows if r["paper"] == paper and table_id(r["table"]) == key]


def row_task(row: dict) -> str:
    """The row's task (rows written before tasks existed are WMT14 En-De)."""
    from localnmt.catalog.tasks import DEFAULT_TASK

    return row.get("task") or DEFAULT_TASK


def group_by_task(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows per task, tasks in order of first appearance (the catalog's column order)."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row_task(row), []).append(row)
    return groups


def is_plain(row: dict) -> bool:
    """A vanilla Transformer row: a plain arch and no extra arguments."""
    return row.get("arch") in PLAIN_ARCHS and not row.get("args")


def pick_baseline(rows: list[dict], row: dict, override: str | None = None) -> dict:
    """The baseline a row is compared with: same size, plain arch, else a 'baseline' label."""
    if override:
        for candidate in rows:
            if candidate["name"] == override:
                return candidate
        raise KeyError(f"baseline {override!r} is not a row of this table")
    same_size = [r for r in rows if r.get("size") == row.get("size")] or rows
    for test in (is_plain, lambda r: bool(_BASELINE_LABEL.match(str(r.get("row", ""))))):
        for candidate in same_size:
            if test(candidate):
                return candidate
    return same_size[0]
