"""Silence fairseq's start-up noise, and only that.

Importing fairseq logs "Please install tensorboardX" (``fairseq.tasks.text_to_speech``, at
INFO) even for ``--help``; every fairseq-train/generate run opens with hydra's warnings about
how fairseq itself calls hydra (experimental API, ``version_base``, ``@package _group_``,
schema matching, ``strict``), and a training run adds torch's deprecation of the
``torch.cuda.amp.autocast`` call inside fairseq. A user of this package can act on none of
them. :func:`install` drops exactly those: one logging filter on that logger and message, and
one ``warnings`` filter per message (the autocast one only where fairseq's code raises it);
every other log line and warning stays (torch's "no accelerator is found" for ``pin_memory``
on a CPU run included). The package calls it on import, before it imports fairseq, and
imports fairseq inside :func:`importing_fairseq`: fairseq's module-level ``torch.jit.script``
calls are deprecated in new torch (a FutureWarning on every command from torch 2.15).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

#: logger name → the starts of the messages dropped from it
NOISY_LOGS: dict[str, tuple[str, ...]] = {
    "fairseq.tasks.text_to_speech": ("Please install tensorboardX",),
}

#: The deprecation warnings hydra raises about fairseq's use of it (regular expressions,
#: matched at the start of the message as ``warnings.filterwarnings`` does).
HYDRA_DEPRECATIONS: tuple[str, ...] = (
    r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"In '[^']*': Usage of deprecated keyword in package header '# @package _group_'",
    r"\s*'[^']*' is validated against ConfigStore schema with the same name",
    r"\s*The strict flag in the compose API is deprecated",
)


#: Deprecations raised by fairseq's own code (message, the fairseq module it is attributed to):
#: about its calls into torch, not the user's.
FAIRSEQ_DEPRECATIONS: tuple[tuple[str, str], ...] = (
    (r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated", r"fairseq\."),
)


class DropMessages(logging.Filter):
    """Drops records whose message starts with one of ``prefixes``."""

    def __init__(self, prefixes: tuple[str, ...]):
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefixes)


def install() -> None:
    """Add the filters (once; calling again changes nothing)."""
    for name, prefixes in NOISY_LOGS.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropMessages) for f in logger.filters):
            logger.addFilter(DropMessages(prefixes))
    for message in HYDRA_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=message)
    for message, module in FAIRSEQ_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning, module=module)


@contextlib.contextmanager
def importing_fairseq() -> Iterator[None]:
    """Around the import of fairseq: no warning for its module-level ``torch.jit.script``
    calls (deprecated in new torch); the same call elsewhere still warns."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated")
        yield
