"""The fairseq adapter: localnmt's models, architectures and their registration with fairseq.

``fairseq-train --user-dir $(localnmt-path)`` imports this folder. Importing it registers every
model and architecture with fairseq, and registers with torch the globals fairseq checkpoints
hold (:mod:`localnmt.safe_load`), so that weights-only loading (torch's default) reads them and
refuses anything else; it also drops fairseq's start-up noise (:mod:`localnmt.quiet`). The
attention itself is the framework-free core, :mod:`localnmt.attention`: the models here only
build :class:`~localnmt.attention.pipeline.LocalAttention` modules where fairseq builds its own.

``transformer`` and ``architectures`` hold the model and its base presets; every other module
of this package (per-paper named architectures, other model families) is imported here too,
so a new preset file needs no registration line. The folder has no ``models/`` or ``tasks/``
subfolder on purpose: fairseq would import those a second time under another name.
"""

import importlib
import os
import sys

if __name__ != "localnmt.fairseq_plugin":
    # fairseq's --user-dir imported this folder as a top-level module, after putting the
    # folder above it (the localnmt package) first on sys.path: take that entry off again and
    # hand fairseq the package itself, so that nothing is imported twice
    _above = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.path and os.path.abspath(sys.path[0] or ".") == _above:
        del sys.path[0]
    sys.modules[__name__] = importlib.import_module("localnmt.fairseq_plugin")
else:
    import pkgutil

    from localnmt import quiet
    from localnmt.safe_load import allow_checkpoint_globals

    quiet.install()  # before fairseq is imported: its tensorboardX line, hydra's deprecations
    allow_checkpoint_globals()
    with quiet.importing_fairseq():
        from localnmt.fairseq_plugin import architectures, transformer

        for _info in pkgutil.iter_modules(__path__):
            if _info.name not in ("architectures", "transformer", "extensions"):
                importlib.import_module(f"{__name__}.{_info.name}")

    __all__ = ["architectures", "transformer"]
