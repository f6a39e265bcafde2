"""localnmt: local attention for fairseq NMT (use with ``--user-dir $(localnmt-path)``).

Importing the package registers every model, architecture and attention method with fairseq,
and registers with torch the globals fairseq checkpoints hold (:mod:`localnmt.safe_load`), so
that weights-only loading (torch's default) reads them and refuses anything else. It also
drops fairseq's start-up noise (:mod:`localnmt.quiet`).
"""

from localnmt import quiet, torch_compat

quiet.install()  # before fairseq is imported: its tensorboardX line, hydra's deprecations
if (_numpy_problem := torch_compat.numpy_problem()) is not None:
    raise ImportError(f"localnmt: {_numpy_problem}")

from localnmt.safe_load import allow_checkpoint_globals  # noqa: E402

allow_checkpoint_globals()

with quiet.importing_fairseq():
    from localnmt import models  # noqa: F401
    from localnmt.attention import fast, methods  # noqa: F401  (registration side effects)
