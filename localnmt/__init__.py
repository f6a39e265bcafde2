"""localnmt: every published way of making Transformer attention local.

The attention core, :mod:`localnmt.attention`, is plain PyTorch: its modules and functions
(:mod:`localnmt.attention.layers`) serve any model. Two thin adapters sit on it: the fairseq
plugin, :mod:`localnmt.fairseq_plugin` (``fairseq-train --user-dir $(localnmt-path)``), and the
Hugging Face transformers adapter, :mod:`localnmt.hf`. Importing this package imports neither
framework, with one exception kept for command lines and checkpoints written before the plugin
had its own subpackage: when fairseq imports this package itself (an old ``--user-dir`` naming
this folder), the plugin is registered as it was then.
"""

import sys

from localnmt import torch_compat

if (_numpy_problem := torch_compat.numpy_problem()) is not None:
    raise ImportError(f"localnmt: {_numpy_problem}")

if "fairseq" in sys.modules:  # e.g. --user-dir <this folder>: fairseq is importing us
    import localnmt.fairseq_plugin  # noqa: F401  (registration side effects)
