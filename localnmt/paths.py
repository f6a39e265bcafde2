"""Where the plugin lives, for ``fairseq-train --user-dir $(localnmt-path)``, and the one
place that decides which ``--user-dir`` a launched fairseq process gets."""

from __future__ import annotations

import importlib
from pathlib import Path

from localnmt.errors import entry_point

PACKAGE_DIR = Path(__file__).resolve().parent
#: The fairseq plugin, the folder ``--user-dir`` names (:mod:`localnmt.fairseq_plugin`).
PLUGIN_DIR = PACKAGE_DIR / "fairseq_plugin"


def default_user_dir() -> str | None:
    """The plugin directory for ``--user-dir`` once the plugin package imports, else None."""
    if not (PLUGIN_DIR / "__init__.py").exists():
        return None
    try:
        importlib.import_module("localnmt.fairseq_plugin")
    except Exception:  # a plugin that does not import is no plugin
        return None
    return str(PLUGIN_DIR)


def resolve_user_dir(choice: str | None) -> str | None:
    """``--user-dir`` of a command line: ``"auto"`` (or None) probes :func:`default_user_dir`,
    ``"none"`` or ``""`` gives no ``--user-dir``, anything else is taken as the directory."""
    if choice is None or choice == "auto":
        return default_user_dir()
    if choice in ("", "none"):
        return None
    return choice


@entry_point("localnmt-path")
def main() -> None:
    """Print the directory to pass to fairseq's ``--user-dir``."""
    print(PLUGIN_DIR)


if __name__ == "__main__":
    main()
