"""One module per attention method; each registers itself with ``@register_modifier``.

Every module of this package is imported here, so a new method is a new file.
"""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
