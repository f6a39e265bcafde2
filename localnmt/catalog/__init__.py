"""The catalog: every named configuration of the papers, as runnable rows.

Each paper has one YAML file in ``configs/`` (``configs/<paper>.yaml``, read and checked by
:mod:`localnmt.catalog.files`) whose ``rows`` become :class:`CatalogRow`; :func:`all_rows`
collects them in :data:`PAPERS` order. ``python -m localnmt.catalog`` prints them (``--json``
for scripts). A row is an architecture, its attention specs
(:class:`~localnmt.attention.attention_specs.AttentionSpecs`, parsed when the row is read: a bad
spec is an error naming the file and the row) and other model arguments, trained and scored on
one task (:mod:`localnmt.catalog.tasks`: language pair or benchmark, its data-prep command and
scoring). A table with several columns (language pairs) has one row per column and model. The
config files keep fairseq's spelling (``args: [--cross-attn-modifiers, 'gmm[k=2]']``); the row
turns it into typed specs on load and back into flags (:attr:`CatalogRow.args`) at the edge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from localnmt.attention.attention_specs import AttentionSpecs
from localnmt.catalog.tasks import DEFAULT_TASK, TASKS
from localnmt.config_files import ConfigError

#: The order the catalog lists the papers in; a file of configs/ not named here comes after
#: them, by name.
PAPER_ORDER = ("vaswani2017", "yang2018", "zhang2021", "yang2019", "pande2021", "shaw2018")


def _papers() -> tuple[str, ...]:
    from localnmt.catalog.files import paper_files

    found = paper_files()
    return tuple(p for p in PAPER_ORDER if p in found) + tuple(
        sorted(p for p in found if p not in PAPER_ORDER)
    )


#: Every paper with a file in configs/, in catalog order.
PAPERS = _papers()


@dataclass(frozen=True)
class CatalogRow:
    """One row of a paper's table (or one point of a figure)."""

    paper: str  # one of PAPERS
    table: str  # "Table 2", "Figure 4"
    row: str  # the row label as printed in the paper
    size: str  # "base" or "big"
    arch: str
    #: the attention specs the row sets over its arch's (its ``--*-attn-modifiers``)
    attention: AttentionSpecs = AttentionSpecs()
    #: the row's other model arguments (fairseq flags, e.g. ``--encoder-attention-heads 1``)
    model_args: tuple[str, ...] = ()
    #: parameter count the paper prints for this row (None when it prints none)
    paper_params: float | None = None
    note: str = ""
    #: catalog name; default ``paper/table/row/size`` (``paper/table/task/row/size`` for rows
    #: of another task than WMT14 En-De)
    name: str = field(default="")
    #: the task (column) this row belongs to: a key of ``localnmt.catalog.tasks.TASKS``
    task: str = DEFAULT_TASK
    #: the subset the paper scores the row on: ``test``, or ``valid`` for dev-set ablations
    split: str = "test"
    #: optimiser / schedule flags the paper states where they differ from the recipe
    #: (``configs/recipes.yaml``); reproduce passes them at paper sizes, not with
    #: ``--tiny``, whose short runs need the tiny recipe's warm-up
    train_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.paper not in PAPERS and self.paper not in _papers():  # a file added since
            raise ValueError(f"unknown paper '{self.paper}' (valid: {', '.join(_papers())})")
        if self.size not in ("base", "big"):
            raise ValueError(f"size must be base or big, got '{self.size}'")
        if self.task not in TASKS:
            raise ValueError(f"unknown task '{self.task}' (valid: {', '.join(TASKS)})")
        if self.split not in ("test", "valid"):
            raise ValueError(f"split must be test or valid, got '{self.split}'")
        if not self.name:
            name = make_name(self.paper, self.table, self.row, self.size, self.task)
            object.__setattr__(self, "name", name)

    @property
    def args(self) -> tuple[str, ...]:
        """The row's fairseq model arguments: its attention specs' flags, then the others."""
        return (*self.attention.to_fairseq_args(), *self.model_args)

    @classmethod
    def from_args(cls, args: Any = (), **values: Any) -> CatalogRow:
        """A row from fairseq-style ``args`` (a config file's ``args:``): the attention
        flags become its typed :attr:`attention`, the rest :attr:`model_args`."""
        attention, rest = AttentionSpecs.from_fairseq_args(tuple(args or ()))
        return cls(attention=attention, model_args=rest, **values)

    def to_json(self) -> dict:
        """The row as ``python -m localnmt.catalog --json`` prints it (without ``params``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "attention":
                continue
            if f.name == "model_args":
                out["args"] = list(self.args)
            else:
                value = getattr(self, f.name)
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> CatalogRow:
        """A row of ``python -m localnmt.catalog --json`` (its ``params`` count is dropped:
        :func:`localnmt.catalog.params.count_parameters` counts when asked)."""
        known = {f.name for f in fields(cls)} - {"attention", "model_args"}
        values = {k: v for k, v in item.items() if k in known}
        values["train_args"] = tuple(values.get("train_args") or ())
        return cls.from_args(item.get("args"), **values)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def make_name(paper: str, table: str, row: str, size: str, task: str = DEFAULT_TASK) -> str:
    """``paper/table/row/size``; rows of another task than the default carry it too."""
    if task == DEFAULT_TASK:
        return f"{paper}/{slug(table)}/{slug(row)}/{size}"
    return f"{paper}/{slug(table)}/{slug(task)}/{slug(row)}/{size}"


def paper_rows(paper: str) -> list[CatalogRow]:
    """The rows of ``configs/<paper>.yaml``, in file order; a row the CatalogRow checks reject
    is a :class:`~localnmt.config_files.ConfigError` naming the file and the row."""
    from localnmt.catalog.files import paper_data, paper_files

    rows = []
    for i, item in enumerate(paper_data(paper)["rows"]):
        try:
            rows.append(CatalogRow.from_args(paper=paper, **item))
        except ValueError as err:
            where = f"{paper_files()[paper]}: rows[{i}] ({item['table']} / {item['row']})"
            raise ConfigError(f"{where}: {err}") from None
    return rows


def all_rows() -> list[CatalogRow]:
    """Every row of every paper file of configs/, papers in :data:`PAPERS` order."""
    rows = [row for paper in _papers() for row in paper_rows(paper)]
    names = [r.name for r in rows]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        papers = sorted({r.paper for r in rows if r.name in dupes})
        files = ", ".join(f"configs/{p}.yaml" for p in papers)
        raise ConfigError(
            f"duplicate catalog names: {', '.join(dupes)} (in {files}: give one of the rows "
            "another row label or a name:)"
        )
    return rows


def load_rows(catalog_json: Path | str | None = None) -> list[CatalogRow]:
    """Every row of the catalog, or the rows of a JSON file in ``--json``'s format (a
    custom or trimmed catalog)."""
    if catalog_json is None:
        return all_rows()
    try:
        items = json.loads(Path(catalog_json).read_text(encoding="utf-8"))
        return [CatalogRow.from_json(item) for item in items]
    except (OSError, ValueError, TypeError) as err:
        raise ConfigError(f"{catalog_json}: not a catalog in --json's format ({err})") from None


def get_row(name: str) -> CatalogRow:
    for row in all_rows():
        if row.name == name:
            return row
    raise KeyError(f"no catalog row named '{name}'")
