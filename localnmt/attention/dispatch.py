"""Kernel registries: which kernel computes a problem, why the others decline, and a trace.

A kernel registers with a ``check`` that names the reasons it cannot take a problem (cheap:
shapes, dtypes, options; every reason, not only the first) and a ``run`` that computes the
problem or still declines with a :class:`Declined` reason (a condition known only while
computing, such as a folded term too large for float32). :meth:`KernelRegistry.run` tries the
kernels in the registry's order and falls back to its reference path, as xformers'
``fmha/dispatch.py`` does with its ``not_supported_reasons``. The order of every registry is
one table, ``localnmt/attention/fast/__init__.py``, where the kernels are registered when the
package is imported; nothing here imports a kernel or knows an attention method: the problems
are typed (``problem.AttentionProblem``, ``mixture.MixtureProblem``).

Seeing the choice::

    with dispatch.trace() as seen:         # every dispatch inside the block
        model(...)
    print(seen.table())                    # problem, kernel that ran, why the others declined

and ``logging.getLogger("localnmt.attention.dispatch").setLevel(logging.DEBUG)`` logs one line
per call. ``with dispatch.forced_kernel("band"):`` runs that kernel only; where it declines,
:class:`KernelDeclined` says why.

A kernel may register a prepared form (``prepare=``): for problems that recur with new
queries, keys and values only (the steps of one decoding run), :meth:`KernelRegistry.prepared`
asks the checks once and returns the chosen kernel as a :class:`PreparedKernel`, which answers
None (the caller dispatches) while dispatches are traced, logged or forced, after the
registry changed, or where :data:`PREPARED` is off.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
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

#: A kernel's check: the reasons it cannot take a problem, every one (an iterable, typically a
#: generator; empty: it can). A check whose reasons depend on each other may give the one it
#: found as a string (None: it can).
Check = Callable[[P], "Iterable[str] | str | None"]
#: A kernel's call prepared on one problem for later problems that differ from it only in
#: their queries, keys and values, of the same shapes (the decoding steps of one run; a form
#: whose registry's choice cannot depend on the shapes may take others, as SDPA's for plain
#: problems): ``(q, k, v) -> out``, or None where it declines them.
PreparedCall = Callable[[Tensor, Tensor, Tensor], "Tensor | None"]


@dataclass(frozen=True)
class Declined:
    """A kernel's answer for a problem it does not take: why, in one line for people."""

    reason: str


def joined(reasons: Sequence[str]) -> str:
    """A kernel's reasons to decline, in one line."""
    return "; ".join(reasons)


class KernelDeclined(LocalnmtError, RuntimeError):
    """A forced kernel declined its problem (the message says which problem and every reason)."""

    def __init__(self, op: str, kernel: str, reasons: Sequence[str], problem: str):
        super().__init__(
            f"kernel '{kernel}' declined the {op} problem ({problem}): {joined(reasons)}"
        )
        self.op, self.kernel, self.problem = op, kernel, problem
        self.reasons = list(reasons)


@dataclass(frozen=True)
class Kernel(Generic[P]):
    """One registered kernel: ``check(problem)`` gives the reasons it cannot take the problem
    (:data:`Check`); ``run(problem)`` computes it (or returns :class:`Declined`)."""

    name: str
    run: Callable[[P], Tensor | Declined | None]
    check: Check | None = None
    #: takes problems whose keys serve groups of queries (beam search's shared source)
    shares_source: bool = False
    #: takes attention problems with a relative value term (``AttentionProblem.relative_values``)
    relative_values: bool = False
    #: the one feature without which the kernel has nothing to do (a band, a Gaussian bias …),
    #: as a cheap test: ``requires(problem)`` is the reason to decline, or None. Its reason
    #: comes after the registry's common reason, before the check's, which then need not be
    #: asked of a problem that lacks it.
    requires: Callable[[P], str | None] | None = None
    #: the kernel's :data:`PreparedCall` for a problem (None: none for it), which does the
    #: checks of everything but the queries, keys and values once
    prepare: Callable[[P], PreparedCall | None] | None = None


def found_reasons(found: Iterable[str] | str | None, every: bool = True) -> list[str]:
    """A check's answer as a list of reasons (``every=False``: the first only, which is all the
    dispatch needs when nothing traces, logs or forces)."""
    if found is None:
        return []
    if isinstance(found, str):
        return [found]
    if every:
        return list(found)
    first = next(iter(found), None)
    return [] if first is None else [first]


@dataclass
class KernelCall:
    """One dispatch: the problem, the kernel that ran, and every reason each other kernel
    declined (those tried before it; with ``trace(explain=True)`` every other one)."""

    op: str
    problem: str
    kernel: str
    declined: dict[str, list[str]] = field(default_factory=dict)
    forced: str | None = None
    #: the path a kernel took inside itself (e.g. band's C kernel or its blocked one)
    detail: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        ran = self.kernel + (f" ({', '.join(self.detail)})" if self.detail else "")
        forced = " [forced]" if self.forced else ""
        others = " | ".join(f"{name}: {joined(why)}" for name, why in self.declined.items())
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


#: Switch for tests and benchmarks (False: no kernel is prepared, every call dispatches).
PREPARED = True

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


@contextlib.contextmanager
def kernel_removed(name: str) -> Iterator[None]:
    """Kernel ``name`` out of its registry inside the block, back in its place after (tests,
    benchmarks: the same model with and without one kernel)."""
    registry = next((r for r in registries() if name in r.names()), None)
    if registry is None:
        raise ValueError(f"unknown kernel '{name}'")
    order = registry.names()
    kernel = registry.kernel(name)
    registry.unregister(name)
    try:
        yield
    finally:
        registry._kernels.append(kernel)
        registry.arrange(order)


def prepared_may_run() -> bool:
    """Whether prepared kernels are on (:data:`PREPARED`) and no kernel is forced and no
    dispatch is traced or logged now: a :class:`PreparedKernel` may run."""
    return (
        PREPARED
        and _forced is None
        and _ACTIVE.get() is None
        and not logger.isEnabledFor(logging.DEBUG)
    )


@dataclass(frozen=True)
class PreparedKernel:
    """The kernel a registry chose for a problem, prepared for later problems that differ from
    it only in their queries, keys and values (:meth:`KernelRegistry.prepared`)."""

    registry: KernelRegistry
    revision: int
    kernel: str
    call: PreparedCall

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor | None:
        """The kernel's output on these tensors, or None (the caller dispatches the whole
        problem): the registry changed since, a kernel is forced, dispatches are traced or
        logged (they see each call), or the kernel declines them."""
        if self.registry.revision != self.revision or not prepared_may_run():
            return None
        return self.call(q, k, v)


def forced_name() -> str | None:
    """The kernel (or reference path) forced now, or None: the automatic choice."""
    return _forced


def is_forced(name: str) -> bool:
    """Whether kernel ``name`` is the one forced now (kernels relax their speed rules then)."""
    return _forced == name


def registries() -> list[KernelRegistry]:
    """Every registry. Their kernels are registered by ``localnmt.attention.fast``, which the
    package imports (so before any of its modules, this one included, is used)."""
    return list(_REGISTRIES)


class KernelRegistry(Generic[P]):
    """Kernels for one kind of problem, tried in order, and the reference path after them.

    ``common_reason(kernel, problem)`` is a reason that applies to every kernel of the
    registry alike (None: none); ``describe(problem)`` a short text of the problem."""

    def __init__(
        self,
        op: str,
        reference_name: str,
        reference: Callable[[P], Tensor],
        describe: Callable[[P], str],
        common_reason: Callable[[Kernel[P], P], str | None] | None = None,
    ):
        self.op, self.reference_name, self.reference = op, reference_name, reference
        self.describe, self.common_reason = describe, common_reason
        self._kernels: list[Kernel[P]] = []
        #: counts the changes of the kernels or their order (a prepared kernel checks it)
        self.revision = 0
        _REGISTRIES.append(self)

    def register(
        self,
        name: str,
        *,
        check: Check | None = None,
        shares_source: bool = False,
        relative_values: bool = False,
        requires: Callable[[P], str | None] | None = None,
        prepare: Callable[[P], PreparedCall | None] | None = None,
    ) -> Callable[[Callable[[P], Tensor | Declined | None]], Callable]:
        """Decorator on a kernel's ``run``: add it, after the kernels registered before (a
        kernel of the same name is replaced in its place); :meth:`arrange` sets the order."""

        def wrap(run: Callable[[P], Tensor | Declined | None]) -> Callable:
            kernel = Kernel(name, run, check, shares_source, relative_values, requires, prepare)
            self.revision += 1
            names = self.names()
            if name in names:
                self._kernels[names.index(name)] = kernel
            else:
                self._kernels.append(kernel)
            return run

        return wrap

    def arrange(self, order: Sequence[str]) -> None:
        """Try the kernels in ``order`` (first: highest priority), which names each registered
        kernel once."""
        registered = self.names()
        if sorted(order) != sorted(registered):
            raise ValueError(
                f"the order of the {self.op} kernels {list(order)} does not name each "
                f"registered kernel once ({registered})"
            )
        self._kernels = [self.kernel(name) for name in order]
        self.revision += 1

    def unregister(self, name: str) -> None:
        """Remove kernel ``name`` (tests, experiments)."""
        self._kernels = [k for k in self._kernels if k.name != name]
        self.revision += 1

    def names(self, reference: bool = False) -> list[str]:
        """Kernel names in the order tried (and the reference path's, last)."""
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

    def reasons(self, kernel: Kernel[P], problem: P, every: bool = True) -> list[str]:
        """Why ``kernel`` cannot take ``problem`` by its checks, every reason (``every=False``:
        the first only); empty: it can, as far as its checks know (``run`` may still
        decline)."""
        found = []
        if self.common_reason is not None:
            common = self.common_reason(kernel, problem)
            if common is not None:
                if not every:
                    return [common]
                found.append(common)
        if kernel.requires is not None:
            missing = kernel.requires(problem)
            if missing is not None:
                if not every:
                    return [missing]
                found.append(missing)
        if kernel.check is not None:
            found += found_reasons(kernel.check(problem), every)
        return found

    def explain(self, problem: P) -> dict[str, list[str]]:
        """Every kernel's reasons to decline ``problem`` by its checks (empty where it would
        take it), in the order tried (nothing runs)."""
        return {k.name: self.reasons(k, problem) for k in self._kernels}

    def run(self, problem: P) -> Tensor:
        """The output of the first kernel that takes ``problem`` (only the forced one, when a
        kernel of this registry is forced), else of the reference path."""
        forced = self.forced()
        seen = _ACTIVE.get()
        watched = seen is not None or logger.isEnabledFor(logging.DEBUG)
        every = watched or forced is not None  # else the first reason is all that is used
        notes_token = _NOTES.set([]) if watched else None
        declined: dict[str, list[str]] = {}
        chosen, out, tried = self.reference_name, None, 0
        try:
            if forced != self.reference_name:
                for kernel in self._kernels:
                    tried += 1
                    if forced is not None and kernel.name != forced:
                        continue
                    why = self.reasons(kernel, problem, every)
                    if not why:
                        result = kernel.run(problem)
                        if isinstance(result, Tensor):
                            chosen, out = kernel.name, result
                            break
                        why = ["declined" if result is None else result.reason]
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
                            why = self.reasons(kernel, problem)
                            declined[kernel.name] = why or [WOULD_ACCEPT]
                self._record(KernelCall(self.op, self.describe(problem), chosen, declined,
                                        forced, list(detail)), seen)  # fmt: skip
        finally:
            if notes_token is not None:
                _NOTES.reset(notes_token)
        return out

    def prepared(self, problem: P) -> PreparedKernel | None:
        """The kernel :meth:`run` would give ``problem`` to, prepared for later problems that
        differ from it only in their queries, keys and values (the steps of one decoding run):
        its checks of everything else done once. None where a kernel is forced, dispatches
        are traced or logged, the first kernel whose checks take the problem has no prepared
        form for it, or no kernel takes it."""
        if not prepared_may_run():
            return None
        for kernel in self._kernels:
            if not self.reasons(kernel, problem, every=False):
                call = None if kernel.prepare is None else kernel.prepare(problem)
                return None if call is None else PreparedKernel(self, self.revision,
                                                                kernel.name, call)  # fmt: skip
        return None

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
