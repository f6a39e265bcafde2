"""``python -m localnmt.catalog [--json|--markdown] [--paper P] [--table T] [--task K]
[--no-params] [--update-readme FILE]``: the catalog rows, with their task (language pair or
benchmark, see ``localnmt.catalog.tasks``) and parameter counts."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from localnmt.catalog import PAPERS, CatalogRow, all_rows
from localnmt.catalog.tables import table_id
from localnmt.catalog.tasks import TASKS
from localnmt.errors import UsageError, entry_point


@entry_point("catalog")
def main(argv: list[str] | None = None) -> int:
    """Print the catalog (or write it into a file's generated block); exit 2 with one line for
    an unknown selection or a broken config file."""
    parser = argparse.ArgumentParser(prog="python -m localnmt.catalog", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.add_argument("--paper", choices=PAPERS, help="only rows of this paper (e.g. yang2018)")
    parser.add_argument("--table", help="only rows of this table (e.g. 'Table 2')")
    parser.add_argument("--task", choices=sorted(TASKS), help="only rows of this task")
    parser.add_argument("--no-params", action="store_true", help="skip parameter counts")
    parser.add_argument("--markdown", action="store_true", help="a markdown table (README)")
    parser.add_argument(
        "--update-readme",
        metavar="FILE",
        help="rewrite the generated catalog table of FILE (docs/catalog.md), between its "
        "catalog markers",
    )
    args = parser.parse_args(argv)

    try:
        rows = select(all_rows(), args.paper, args.table, args.task)
    except LookupError as err:
        raise UsageError(str(err)) from None
    counts: dict[str, int | None] = {}
    if not args.no_params:
        from localnmt.catalog.params import count_parameters

        for r in rows:
            counts[r.name] = count_parameters(r.arch, r.args)
    if args.json:
        out = []
        for r in rows:
            item = r.to_json()
            item["params"] = counts.get(r.name)
            out.append(item)
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    if args.update_readme:
        update_readme(Path(args.update_readme), render_table(rows, counts, markdown=True))
        return 0
    print(render_table(rows, counts, markdown=args.markdown))
    return 0


def _natural(text: str) -> list:
    """Sort key: "Table 2" before "Table 10"."""
    parts = re.split(r"(\d+)", text.lower())
    return [int(p) if p.isdigit() else p for p in parts]


def select(
    rows: list[CatalogRow], paper: str | None, table: str | None, task: str | None
) -> list[CatalogRow]:
    """The rows of ``paper``, ``table`` (as ``reproduce`` reads it: ``"Table 4"``,
    ``table4``, ``4``) and ``task`` (None: any); a selection with no row is a LookupError
    naming the valid choices."""
    chosen = rows
    for key, value in (("paper", paper), ("task", task), ("table", table)):
        if value is None:
            continue
        valid = sorted({getattr(r, key) for r in chosen}, key=_natural)
        if key == "table":
            kept = [r for r in chosen if table_id(r.table) == table_id(value)]
        else:
            kept = [r for r in chosen if getattr(r, key) == value]
        if not kept:
            scope = " and ".join(
                f"{k} {v}" for k, v in (("paper", paper), ("task", task)) if v and k != key
            )
            scope = f" of {scope}" if scope else ""
            raise LookupError(
                f"no rows with {key} {value!r}{scope} (valid: {', '.join(valid) or 'none'})"
            )
        chosen = kept
    return chosen


START, END = "<!-- catalog:start -->", "<!-- catalog:end -->"


def readme_block(text: str) -> str:
    """The generated table between the catalog markers of a README."""
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def update_readme(path: Path, table: str) -> None:
    text = path.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{START}\n{table}\n{END}{tail}")


def render_table(rows, counts, markdown: bool = False) -> str:
    header = ["paper", "table", "task", "row", "size", "arch", "args", "#params", "paper #params"]
    lines = []
    for r in rows:
        n = counts.get(r.name)
        task = TASKS[r.task].label + (" (dev)" if r.split == "valid" else "")
        lines.append(
            [
                r.paper,
                r.table,
                task,
                r.row,
                r.size,
                r.arch,
                " ".join(r.args),
                "" if n is None else f"{n / 1e6:.2f}M",
                "" if r.paper_params is None else f"{r.paper_params:g}M",
            ]
        )
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in lines]
        return "\n".join(out)
    widths = [
        max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
        for i, h in enumerate(header)
    ]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        + [fmt.format(*line) for line in lines]
    )


if __name__ == "__main__":
    raise SystemExit(main())
