"""Tables of the catalog: choosing a paper's table, grouping its rows by task, and which row
is a table's baseline.

    from localnmt.catalog import all_rows
    from localnmt.catalog.tables import baseline_of, select_table

    rows = select_table(all_rows(), "yang2018", "Table 4")
    baseline_of(rows, rows[2]).row  # 'Transformer-Base'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from localnmt.catalog import CatalogRow
from localnmt.errors import UsageError

#: Architectures of a vanilla Transformer (a row with one of them and no arguments is plain).
PLAIN_ARCHS = frozenset(
    {
        "localnmt_base",
        "localnmt_big",
        "transformer",
        "transformer_wmt_en_de",
        "transformer_vaswani_wmt_en_de_big",
        "localnmt_roberta_base",  # BERT-base, the reference of Pande et al. Table 4
    }
)
_BASELINE_LABEL = re.compile(r"^(baseline|transformer([ -_]?(base|big))?)\b", re.IGNORECASE)


def table_key(table: str) -> str:
    """``"Table 2"``, ``"table2"`` and ``"2"`` all become ``"2"``."""
    match = re.search(r"\d+\w*", str(table))
    return match.group(0).lower() if match else str(table).strip().lower()


def table_id(table: str) -> str:
    """``"Table 2"``, ``"table2"``, ``"2"`` → ``"table2"``; ``"Figure 2a"``, ``"fig2a"`` →
    ``"figure2a"`` (a table and a figure with the same number are different selections)."""
    kind = "figure" if str(table).strip().lower().startswith("fig") else "table"
    return f"{kind}{table_key(table)}"


def select_table(rows: Sequence[CatalogRow], paper: str, table: str) -> list[CatalogRow]:
    """Rows of one paper and table (or figure), in catalog order."""
    key = table_id(table)
    return [r for r in rows if r.paper == paper and table_id(r.table) == key]


def group_by_task(rows: Sequence[CatalogRow]) -> dict[str, list[CatalogRow]]:
    """Rows per task, tasks in order of first appearance (the catalog's column order)."""
    groups: dict[str, list[CatalogRow]] = {}
    for row in rows:
        groups.setdefault(row.task, []).append(row)
    return groups


def is_plain(row: CatalogRow) -> bool:
    """A vanilla Transformer row: a plain arch and no extra arguments."""
    return row.arch in PLAIN_ARCHS and not row.args


def baseline_of(
    rows: Sequence[CatalogRow], row: CatalogRow, override: str | None = None
) -> CatalogRow:
    """The row ``row`` is compared with: ``override`` (a catalog name) when given; else the
    first plain row of the same size; else the first whose label says baseline; else the
    first of the same size. An ``override`` that is no row of ``rows`` stops in one line
    naming the rows (:class:`~localnmt.errors.UsageError`)."""
    if override:
        for candidate in rows:
            if candidate.name == override:
                return candidate
        names = ", ".join(r.name for r in rows)
        raise UsageError(f"--baseline {override!r} is not a row of this table; its rows: {names}")
    same_size = [r for r in rows if r.size == row.size] or list(rows)
    for test in (is_plain, lambda r: bool(_BASELINE_LABEL.match(r.row))):
        for candidate in same_size:
            if test(candidate):
                return candidate
    return same_size[0]


def baselines_first(
    rows: Sequence[CatalogRow], baselines: dict[str, CatalogRow]
) -> list[CatalogRow]:
    """Baselines first (their hypotheses are the other rows' significance reference)."""
    base_names = {b.name for b in baselines.values()}
    return [r for r in rows if r.name in base_names] + [r for r in rows if r.name not in base_names]
