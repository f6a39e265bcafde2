"""The optional C extensions: which sources a build came from, and loading only current ones.

``setup.py`` compiles each extension with the digest of its sources (:func:`source_digest`: the
``.c`` file and every header of ``localnmt/csrc``) and the module reports it back
(``source_digest()``, csrc/builds.h). In an editable or in-place install the sources sit next
to the package, and a module built from other sources (edited or pulled since the last build)
is not used: :func:`load_extension` says how to rebuild and the torch ops run instead, the
same numbers more slowly. Where the sources are not installed (a wheel), the module is trusted.

Imports nothing but the standard library: ``setup.py`` loads this file by path.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from pathlib import Path
from types import ModuleType

logger = logging.getLogger(__name__)

#: Where the C sources are, relative to this file.
CSRC = Path(__file__).resolve().parent / "csrc"
#: How a user rebuilds the extensions in place.
REBUILD = "pip install -e . (or: python setup.py build_ext --inplace)"


def source_digest(source: str, csrc: Path = CSRC) -> str | None:
    """16 hex digits of SHA-256 over ``csrc/source`` and every ``csrc/*.h`` (by name); None
    when the sources are not there."""
    files = [csrc / source, *sorted(csrc.glob("*.h"))]
    if not files[0].is_file():
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def load_extension(name: str, source: str, csrc: Path = CSRC) -> ModuleType | None:
    """``localnmt.<name>`` if it was built and from the sources beside it, else None (with a
    warning naming the rebuild command when it is stale)."""
    try:
        module = importlib.import_module(f"localnmt.{name}")
    except ImportError:  # no C compiler at install time
        return None
    expected = source_digest(source, csrc)
    built = getattr(module, "source_digest", lambda: None)()
    if expected is not None and built != expected:
        logger.warning(
            "localnmt.%s was built from other sources than localnmt/csrc/%s now holds "
            "(edited or updated since the build): using torch ops instead, the same numbers "
            "more slowly. Rebuild with: %s",
            name,
            source,
            REBUILD,
        )
        return None
    return module
