"""The outcome of one check, and the PASS/FAIL table of all of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass
class CheckResult:
    """One check: its section (``forward/backward``, ``incremental``, ``training``), what it
    ran (``encoder_self:localness float16``), PASS / FAIL / SKIP, a line of detail, seconds."""

    section: str
    name: str
    status: str
    detail: str
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def format_table(results: list[CheckResult]) -> str:
    """A fixed-width table, one line per check, then the counts."""
    width = max([len(r.name) for r in results] + [4])
    section = max([len(r.section) for r in results] + [7])
    lines = [f"{'section':{section}}  {'check':{width}}  result  detail"]
    for r in results:
        lines.append(f"{r.section:{section}}  {r.name:{width}}  {r.status:6}  {r.detail}")
    counts = {status: sum(r.status == status for r in results) for status in (PASS, FAIL, SKIP)}
    lines.append(", ".join(f"{n} {status}" for status, n in counts.items()))
    return "\n".join(lines)
