"""One-line errors of the command-line tools: a message naming what to fix, exit status 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

from localnmt.config_files import ConfigError

T = TypeVar("T")


class UsageError(SystemExit):
    """A wrong option or missing input, found before any long work starts (exit status 2).

    A ``SystemExit``, so a script that does not catch it still exits with 2; :func:`cli`
    prints its message first."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def cli(prog: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate a ``main``: a :class:`UsageError`, or a
    :class:`~localnmt.config_files.ConfigError` (a config file that does not match its schema),
    is printed as ``prog: message``, exit 2."""

    def wrap(main: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> T:
            try:
                return main(*args, **kwargs)
            except UsageError as err:
                print(f"{prog}: {err.message}", file=sys.stderr, flush=True)
                raise
            except ConfigError as err:  # a config file that does not match its schema
                print(f"{prog}: {err}", file=sys.stderr, flush=True)
                raise SystemExit(2) from None

        return run

    return wrap
