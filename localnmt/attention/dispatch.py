"""Kernel registries: which kernel computes a problem, why the others decline, and a trace.

A kernel registers with a priority, a ``check`` that names the first reason it cannot take a
problem (cheap: shapes, dtypes, options), and a ``run`` that computes the problem or still
declines with a :class:`Declined` reason (a condition known only while computing, such as a
folded term too large for float32). :meth:`KernelRegistry.run` tries the kernels from the highest
priority down and falls back to the registry's reference path, as xformers' ``fmha/dispatch.py``
does with its ``not_supported_reasons``. Nothing here knows an attention method: the problems
are typed (``kernels.AttentionProblem``, ``mixture.MixtureProblem``).

Seeing the choice::

    with kernels.trace() as seen:          # every dispatch inside the block
        model(...)
    print(seen.table())                    # problem, kernel that ran, why the others declined

and ``logging.getLogger("localnmt.attention.dispatch").setLevel(logging.DEBUG)`` logs one line
per call. ``with kernels.forced_kernel("band"):`` runs that kernel only; where it declines,
:class:`KernelDeclined` says why.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from torch import Tensor

from localnmt.errors import LocalnmtError

logger = logging.getLogger(__name__)
# one line per attention call only when asked for: importing fairseq sets the root logger to
# DEBUG (fairseq/models/wav2vec/wav2vec2_classification.py), which would otherwise turn it on
logger.setLevel(logging.INFO)

P = TypeVar("P")

#: What ``KernelCall.declined`` says of a kernel below the one that ran that would also have
#: taken the problem (only with ``trace(explain=True)``).
WOULD_ACCEPT = "would also accept (lower priority)"


@dataclass(frozen=True)
class Declined:
    """A kernel's answer for a problem it does not take: why, in one line for people."""

    reason: str


class KernelDeclined(LocalnmtError, RuntimeError):
    """A forced kernel declined its problem (the message says which problem and why)."""

    def __init__(self, op: str, kernel: str, reason: str, problem: str):
        super().__init__(f"kernel '{kernel}' declined the {op} problem ({problem}): {reason}")
        self.op, self.kernel, self.reason, self.problem = op, kernel, reason, problem


@dataclass(frozen=True)
class Kernel(Generic[P]):
    """One registered kernel: ``check(problem)`` gives the first reason it cannot take the
    problem (None: it can); ``run(problem)`` computes it (or returns :class:`Declined`)."""

    name: str
    priority: int
    run: Callable[[P], Tensor | Declined | None]
    check: Callable[[P], str | None] | None = None
    #: takes problems whose keys serve groups of queries (beam search's shared source)
    shares_source: bool = False


@dataclass
class KernelCall:
    """One dispatch: the problem, the kernel that ran, and why each other kernel declined
    (those tried before it; with ``trace(explain=True)`` every other one)."""

    op: str
    problem: str
    kernel: str
    declined: dict[str, str] = field(default_factory=dict)
    forced: str | None = None
    #: the path a kernel took inside itself (e.g. band's C kernel or its blocked one)
    detail: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        ran = self.kernel + (f" ({', '.join(self.detail)})" if self.detail else "")
        forced = " [forced]" if self.forced else ""
        others = "; ".join(f"{name}: {why}" for name, why in self.declined.items())
        return f"{self.op} {self.problem}: {ran}{forced}" + (f" | {others}" if others else "")


@dataclass
class KernelTrace:
    """The dispatches seen inside a :func:`trace` block, in order."""

    explain: bool = False
    calls: list[KernelCall] = field(default_factory=list)

    def kernels(self, op: str | None = None) -> list[str]:
        """The kernel that ran at each call (of ``op`` only, when given)."""
        return [c.kernel for c in self.calls if op is None or c.op == op]

    def table(self) -> str:
        """One line per call."""
        return "\n".join(map(str, self.calls))


_ACTIVE: ContextVar[KernelTrace | None] = ContextVar("localnmt_kernel_trace", default=None)
_NOTES: ContextVar[list[str] | None] = ContextVar("localnmt_kernel_notes", default=None)
_REGISTRIES: list[KernelRegistry] = []
_forced: str | None = None


@contextlib.contextmanager
def trace(explain: bool = False) -> Iterator[KernelTrace]:
    """Record every kernel dispatch inside the block (nested blocks: the innermost records).
    ``explain``: also ask the kernels below the one that ran why they would decline."""
    seen = KernelTrace(explain=explain)
    token = _ACTIVE.set(seen)
    try:
        yield seen
    finally:
        _ACTIVE.reset(token)


def note(detail: str) -> None:
    """Add the path a kernel takes inside itself to the call being traced (a no-op when
    nothing traces or logs)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.append(detail)


@contextlib.contextmanager
def forced_kernel(name: str | None) -> Iterator[None]:
    """Run only kernel ``name`` (or a registry's reference path, e.g. ``"dense"``) inside the
    block; problems of other registries keep the automatic choice. None: automatic."""
    global _forced
    if name is not None and not any(name in r.names(reference=True) for r in registries()):
        known = sorted({n for r in registries() for n in r.names(reference=True)})
        raise ValueError(f"unknown kernel '{name}' (known: {', '.join(known)})")
    old, _forced = _forced, name
    try:
        yield
    finally:
        _forced = old


def is_forced(name: str) -> bool:
    """Whether kernel ``name`` is the one forced now (kernels relax their speed rules then)."""
    return _forced == name


def registries() -> list[KernelRegistry]:
    """Every registry, its kernels registered (importing ``localnmt.attention.fast``)."""
    import localnmt.attention.fast  # noqa: F401  (registration side effects)

    return list(_REGISTRIES)


class KernelRegistry(Generic[P]):
    """Kernels for one kind of problem, tried by priority, and the reference path after them.

    ``common_reason(shares_source, problem)`` is a reason that applies to every kernel of the
    registry alike (None: none); ``describe(problem)`` a short text of the problem."""

    def __init__(
        self,
        op: str,
        reference_name: str,
        reference: Callable[[P], Tensor],
        describe: Callable[[P], str],
        common_reason: Callable[[bool, P], str | None] | None = None,
    ):
        self.op, self.reference_name, self.reference = op, reference_name, reference
        self.describe, self.common_reason = describe, common_reason
        self._kernels: list[Kernel[P]] = []
        _REGISTRIES.append(self)

    def register(
        self,
        name: str,
        priority: int,
        *,
        check: Callable[[P], str | None] | None = None,
        shares_source: bool = False,
    ) -> Callable[[Callable[[P], Tensor | Declined | None]], Callable]:
        """Decorator on a kernel's ``run``: add it (higher priority is tried first; a kernel of
        the same name is replaced)."""

        def wrap(run: Callable[[P], Tensor | Declined | None]) -> Callable:
            kernel = Kernel(name, priority, run, check, shares_source)
            self._kernels = [k for k in self._kernels if k.name != name] + [kernel]
            self._kernels.sort(key=lambda k: -k.priority)
            return run

        return wrap

    def unregister(self, name: str) -> None:
        """Remove kernel ``name`` (tests, experiments)."""
        self._kernels = [k for k in self._kernels if k.name != name]

    def names(self, reference: bool = False) -> list[str]:
        """Kernel names, highest priority first (and the reference path's, last)."""
        names = [k.name for k in self._kernels]
        return [*names, self.reference_name] if reference else names

    def kernel(self, name: str) -> Kernel[P]:
        return next(k for k in self._kernels if k.name == name)

    def forced(self) -> str | None:
        """The forced kernel if it is one of this registry's (or its reference path)."""
        if _forced is not None and _forced in self.names(reference=True):
            return _forced
        return None

    def shares_source(self, name: str) -> bool:
        return name != self.reference_name and self.kernel(name).shares_source

    def reason(self, kernel: Kernel[P], problem: P) -> str | None:
        """Why ``kernel`` cannot take ``problem`` by its checks (None: it can, as far as its
        checks know; ``run`` may still decline)."""
        if self.common_reason is not None:
            common = self.common_reason(kernel.shares_source, problem)
            if common is not None:
                return common
        return None if kernel.check is None else kernel.check(problem)

    def explain(self, problem: P) -> dict[str, str | None]:
        """Every kernel's reason to decline ``problem`` by its checks, None where it would
        take it, in priority order (nothing runs)."""
        return {k.name: self.reason(k, problem) for k in self._kernels}

    def run(self, problem: P) -> Tensor:
        """The output of the first kernel that takes ``problem`` (only the forced one, when a
        kernel of this registry is forced), else of the reference path."""
        forced = self.forced()
        seen = _ACTIVE.get()
        watched = seen is not None or logger.isEnabledFor(logging.DEBUG)
        notes_token = _NOTES.set([]) if watched else None
        declined: dict[str, str] = {}
        chosen, out, tried = self.reference_name, None, 0
        try:
            if forced != self.reference_name:
                common = self.common_reason
                for kernel in self._kernels:
                    tried += 1
                    if forced is not None and kernel.name != forced:
                        continue
                    # self.reason(kernel, problem), inlined: this loop runs at every call
                    why = None if common is None else common(kernel.shares_source, problem)
                    if why is None and kernel.check is not None:
                        why = kernel.check(problem)
                    if why is None:
                        result = kernel.run(problem)
                        if isinstance(result, Tensor):
                            chosen, out = kernel.name, result
                            break
                        why = "declined" if result is None else result.reason
                    declined[kernel.name] = why
                if out is None and forced is not None:
                    raise KernelDeclined(self.op, forced, declined[forced], self.describe(problem))
            if out is None:
                out = self.reference(problem)
            if watched:
                detail = _NOTES.get() or []
                if seen is not None and seen.explain:
                    rest = self._kernels[tried:] if forced is None else self._kernels
                    for kernel in rest:
                        if kernel.name not in declined and kernel.name != chosen:
                            why = self.reason(kernel, problem)
                            declined[kernel.name] = WOULD_ACCEPT if why is None else why
                self._record(KernelCall(self.op, self.describe(problem), chosen, declined,
                                        forced, list(detail)), seen)  # fmt: skip
        finally:
            if notes_token is not None:
                _NOTES.reset(notes_token)
        return out

    def note_reference(self, problem: P, why: str) -> None:
        """Record that the caller took the reference path itself, and why (a no-op when
        nothing traces or logs)."""
        seen = _ACTIVE.get()
        if seen is None and not logger.isEnabledFor(logging.DEBUG):
            return
        call = KernelCall(self.op, self.describe(problem), self.reference_name, detail=[why])
        self._record(call, seen)

    @staticmethod
    def _record(call: KernelCall, seen: KernelTrace | None) -> None:
        if seen is not None:
            seen.calls.append(call)
        logger.debug("%s", call)
