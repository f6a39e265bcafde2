"""localnmt: local attention for fairseq NMT (use with ``--user-dir $(localnmt-path)``).

Importing the package registers every model, architecture and attention method with fairseq,
and registers with torch the globals fairseq checkpoints hold (:mod:`localnmt.safe_load`), so
that weights-only loading (torch's default) reads them and refuses anything else.
"""

from localnmt.safe_load import allow_checkpoint_globals

allow_checkpoint_globals()

from localnmt import models  # noqa: E402,F401
from localnmt.attention import fast, methods  # noqa: E402,F401  (registration side effects)
