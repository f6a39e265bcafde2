"""The package's layers: a module imports only from its own layer or the layers below it
(docs/orchestration.md). Read from the source, so a function-level import counts too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "localnmt"

#: what each layer may not import (the layers above it)
FORBIDDEN = {
    "base": ("localnmt.runs", "localnmt.quickstart", "localnmt.data", "localnmt.catalog"),
    "catalog": ("localnmt.runs", "localnmt.quickstart"),
    "data": ("localnmt.runs", "localnmt.quickstart"),
    "evaluation": ("localnmt.runs", "localnmt.quickstart"),
    # the core is framework-free: no adapter, no fairseq, no transformers
    "attention": (
        "localnmt.runs",
        "localnmt.quickstart",
        "localnmt.data",
        "localnmt.catalog",
        "localnmt.fairseq_plugin",
        "localnmt.hf",
        "fairseq",
        "transformers",
    ),
    "fairseq_plugin": ("localnmt.runs", "localnmt.quickstart", "localnmt.data", "localnmt.hf"),
    "hf": (
        "localnmt.runs",
        "localnmt.quickstart",
        "localnmt.data",
        "localnmt.fairseq_plugin",
        "fairseq",
    ),
    "runs": ("localnmt.quickstart",),
}
BASE_MODULES = ("errors.py", "atomic.py", "digests.py", "steps.py", "batching.py",
                "config_files.py", "fields.py", "safe_load.py", "locks.py",
                "processes.py")  # fmt: skip


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "localnmt":
            names += [f"localnmt.{alias.name}" for alias in node.names]  # from localnmt import x
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def _layer_files(layer: str) -> list[Path]:
    if layer == "base":
        return [PACKAGE / name for name in BASE_MODULES]
    return sorted((PACKAGE / layer).rglob("*.py"))


def test_no_layer_imports_a_higher_one() -> None:
    wrong = []
    for layer, forbidden in FORBIDDEN.items():
        for path in _layer_files(layer):
            for name in _imports(path):
                if name.startswith(forbidden):
                    wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_the_base_modules_import_only_the_standard_library_and_each_other() -> None:
    allowed = {f"localnmt.{name[:-3]}" for name in BASE_MODULES}
    for path in _layer_files("base"):
        for name in _imports(path):
            if name.startswith("localnmt"):
                assert name in allowed, f"{path.name} imports {name}"
