"""Where the plugin lives, for ``fairseq-train --user-dir $(localnmt-path)``, and the one
place that decides which ``--user-dir`` a launched fairseq process gets."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def default_user_dir() -> str | None:
    """The plugin directory for ``--user-dir`` once the plugin package imports, else None."""
    if not (PACKAGE_DIR / "__init__.py").exists():
        return None
    try:
        found = importlib.util.find_spec("localnmt.models") is not None
        if found:
            importlib.import_module("localnmt.models")
    except Exception:  # a plugin that does not import is no plugin
        return None
    return str(PACKAGE_DIR) if found else None


def resolve_user_dir(choice: str | None) -> str | None:
    """``--user-dir`` of a command line: ``"auto"`` (or None) probes :func:`default_user_dir`,
    ``"none"`` or ``""`` gives no ``--user-dir``, anything else is taken as the directory."""
    if choice is None or choice == "auto":
        return default_user_dir()
    if choice in ("", "none"):
        return None
    return choice


def main() -> None:
    """Print the directory to pass to fairseq's ``--user-dir``."""
    print(PACKAGE_DIR)


if __name__ == "__main__":
    main()
