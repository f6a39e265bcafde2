"""The papers' files of ``configs/`` (``<paper>.yaml``): their schema, read into catalog rows.

A paper file is a mapping::

    paper: yang2018          # the file's name without .yaml
    shared: {...}            # optional: values the rows refer to as YAML aliases (*name)
    extra: {...}             # optional: paper-specific data its Python module reads
    rows:                    # the rows, in the order the catalog lists them
      - table: Table 4       # required: table, row, size, arch
        row: + Rel_Pos
        size: base           # base | big
        arch: localnmt_base
        args: [--encoder-attn-modifiers, rel_pos]    # optional, see ROW_KEYS
        ...

Every key is checked on load (:func:`localnmt.config_files.check`); a wrong one is one
:class:`~localnmt.config_files.ConfigError` naming the file, the row and the key.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from localnmt.catalog.tasks import TASKS
from localnmt.config_files import ConfigError, Key, check, config_dir, read_yaml

#: Files of configs/ that are not papers.
NOT_PAPERS = ("recipes.yaml", "quickstart.yaml")

#: Keys of one row (the fields of :class:`localnmt.catalog.CatalogRow` but ``paper``).
ROW_KEYS: dict[str, Key] = {
    "table": Key(str, required=True),
    "row": Key(str, required=True),
    "size": Key(str, required=True, choices=("base", "big")),
    "arch": Key(str, required=True),
    "args": Key(list, items=str),
    "paper_params": Key((float, type(None))),
    "note": Key(str),
    "name": Key(str),
    "task": Key(str, choices=tuple(TASKS)),
    "split": Key(str, choices=("test", "valid")),
    "train_args": Key(list, items=str),
}
#: Keys of a paper file.
PAPER_KEYS: dict[str, Key] = {
    "paper": Key(str, required=True),
    "shared": Key(dict),
    "extra": Key(dict),
    "rows": Key(list, required=True),
}


def paper_files(directory: Path | None = None) -> dict[str, Path]:
    """``{paper: path}`` of every paper file of the config folder, sorted by name."""
    directory = config_dir() if directory is None else Path(directory)
    return {
        path.stem: path for path in sorted(directory.glob("*.yaml")) if path.name not in NOT_PAPERS
    }


def read_paper(path: Path | str) -> dict[str, Any]:
    """One paper file, checked: ``{"paper", "extra", "rows"}`` with every row a checked dict
    (list values as tuples). The CatalogRow checks (unique names) are the caller's."""
    path = Path(path)
    data = check(read_yaml(path), PAPER_KEYS, str(path))
    if data["paper"] != path.stem:
        raise ConfigError(
            f"{path}: key 'paper' is {data['paper']!r}, but a paper file is named after its "
            f"paper: {data['paper']}.yaml"
        )
    rows = []
    for i, raw in enumerate(data["rows"]):
        label = ""
        if isinstance(raw, dict):
            label = f" ({raw.get('table', '?')} / {raw.get('row', '?')})"
        row = check(raw, ROW_KEYS, f"{path}: rows[{i}]{label}")
        for key in ("args", "train_args"):
            if key in row:
                row[key] = tuple(row[key])
        rows.append(row)
    return {"paper": data["paper"], "extra": data.get("extra", {}), "rows": rows}


@cache
def _read_cached(path: Path, mtime_ns: int) -> dict[str, Any]:
    return read_paper(path)


def paper_data(paper: str) -> dict[str, Any]:
    """The checked content of ``configs/<paper>.yaml`` (cached until the file changes)."""
    files = paper_files()
    if paper not in files:
        raise ConfigError(
            f"no config file for paper {paper!r} in {config_dir()} (papers: {', '.join(files)})"
        )
    path = files[paper]
    return _read_cached(path, path.stat().st_mtime_ns)
