"""The layout of ``localnmt/attention/fast``: kernels below methods, C behind the registries.

Read from the source (imports) and the registries, so a module that breaks the layering fails
here rather than in review."""

from __future__ import annotations

import ast
from pathlib import Path

import localnmt.attention.fast as fast
from localnmt.attention import dispatch

ATTENTION = Path(fast.__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def files_under(folder: str) -> list[Path]:
    return sorted((ATTENTION / folder).rglob("*.py"))


def test_no_kernel_imports_a_method():
    for path in files_under("fast"):
        bad = {m for m in imported_modules(path) if m.startswith("localnmt.attention.methods")}
        assert not bad, f"{path.relative_to(ATTENTION)} imports {sorted(bad)}"


def test_methods_reach_c_only_through_the_registries():
    for path in files_under("methods"):
        bad = {
            m
            for m in imported_modules(path)
            if m.startswith("localnmt.attention.fast")
            and not m.startswith("localnmt.attention.fast.autograd")
            or m.startswith("localnmt.cbuild")
        }
        assert not bad, f"{path.relative_to(ATTENTION)} imports {sorted(bad)}"


def test_only_the_native_wing_loads_c_extensions():
    for path in files_under("."):
        uses_cbuild = any(m.startswith("localnmt.cbuild") for m in imported_modules(path))
        inside = path.is_relative_to(ATTENTION / "fast" / "native")
        assert not uses_cbuild or inside, path.relative_to(ATTENTION)


def test_every_top_level_module_of_fast_is_a_registered_kernel():
    modules = {p.stem for p in (ATTENTION / "fast").glob("*.py")} - {"__init__"}
    assert modules == set(fast.KERNEL_MODULES)
    registered = {
        kernel.run.__module__.rsplit(".", 1)[-1]
        for registry in dispatch.registries()
        for kernel in registry._kernels
    }
    assert set(fast.KERNEL_MODULES) <= registered, set(fast.KERNEL_MODULES) - registered


def test_kernel_names_are_unique_across_registries():
    names = [n for r in dispatch.registries() for n in r.names(reference=True)]
    assert len(names) == len(set(names)), names
