"""Models of localnmt (registered with fairseq on import).

``transformer`` and ``architectures`` hold the model and its base presets; every other module
of this package (per-paper named architectures, other model families) is imported here too,
so a new preset file needs no registration line.
"""

import importlib
import pkgutil

from localnmt.models import architectures, transformer

for _info in pkgutil.iter_modules(__path__):
    if _info.name not in ("architectures", "transformer", "extensions"):
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["architectures", "transformer"]
