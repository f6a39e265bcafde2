"""Run fairseq-generate (beam search) and read its hypotheses back in test-set order."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from localnmt import progress
from localnmt.errors import DataError
from localnmt.paths import default_user_dir  # noqa: F401  (the one --user-dir helper)
from localnmt.runs.run_specs import DEFAULT_DECODING, DecodeSpec
from localnmt.runs.streaming import stream_lines

_LINE = re.compile(r"^([HTS])-(\d+)\t")


def infer_langs(data_bin: Path, subset: str = "test") -> tuple[str, str]:
    """Source and target language from ``<subset>.<src>-<tgt>.<src>.idx`` in a data-bin."""
    for idx in sorted(Path(data_bin).glob(f"{subset}.*-*.*.idx")):
        pair, lang = idx.name.split(".")[1:3]
        src, tgt = pair.split("-")
        if lang in (src, tgt):
            return src, tgt
    raise FileNotFoundError(f"no {subset}.<src>-<tgt>.*.idx in {data_bin}")


def generate_command(
    data_bin: Path,
    checkpoint: Path,
    decode: DecodeSpec = DEFAULT_DECODING,
    *,
    subset: str = "test",
    user_dir: str | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    cpu: bool | None = None,
    extra: list[str] | None = None,
) -> list[str]:
    """fairseq-generate command (through our entry point that fixes checkpoint loading),
    searching as ``decode`` says.

    ``--required-batch-size-multiple 1``: ve-fairseq 0.12.3 otherwise drops the last partial
    batch (up to 7 sentences of the test set).
    """
    if cpu is None:
        import torch

        cpu = not torch.cuda.is_available()
    cmd = [sys.executable, "-m", "localnmt.runs.fairseq_entry", "generate", str(data_bin),
           "--path", str(checkpoint), "--gen-subset", subset, *decode.generate_args(),
           "--required-batch-size-multiple", "1", "--num-workers", "0"]  # fmt: skip
    if user_dir:
        cmd += ["--user-dir", user_dir]
    if source_lang and target_lang:
        cmd += ["--source-lang", source_lang, "--target-lang", target_lang]
    if cpu:
        cmd += ["--cpu"]
    return cmd + list(extra or [])


class GenerateFailed(DataError):
    """fairseq-generate stopped with an error; the message has its cause and its log."""


_CAUSE = re.compile(r"^[\w.]*(Error|Exception)\b.*: .+")


def failure_cause(log_text: str) -> str:
    """The last ``SomeError: message`` line of a log (else its last line)."""
    lines = [line.strip() for line in log_text.split("\n") if line.strip()]
    causes = [line for line in lines if _CAUSE.match(line)]
    return (causes or lines or ["no output"])[-1]


def run_generate(
    cmd: list[str], output: Path, log: Path | None = None, sentences: int | None = None
) -> None:
    """Run a generate command, writing its stdout to ``output`` (stderr to ``log``), with a
    progress bar over its ``S-`` lines (:mod:`localnmt.progress`; ``sentences``: their
    total); a failure is a :class:`GenerateFailed` naming the cause and the log."""
    output.parent.mkdir(parents=True, exist_ok=True)
    log = log or output.with_suffix(".log")
    with (
        open(output, "wb") as out,
        open(log, "w") as err,
        progress.bar(total=sentences, desc="translating", unit="sent") as shown,
    ):

        def each_line(line: bytes) -> None:  # written as it came
            out.write(line)
            if line.startswith(b"S-"):
                shown.update(1)

        returncode = stream_lines(cmd, each_line, stderr=err, text=False)
    if returncode != 0:
        cause = failure_cause(Path(log).read_text(encoding="utf-8", errors="replace"))
        raise GenerateFailed(
            f"fairseq-generate failed (exit status {returncode}): {cause} (log: {log})"
        )


def parse_generate(text: str, kind: str = "H") -> dict[int, str]:
    """Map sentence id -> text of the first ``H`` (hypothesis), ``T`` or ``S`` line per id."""
    found: dict[int, str] = {}
    for line in text.split("\n"):  # not splitlines(): a U+0085 or U+2028 stays in its line
        match = _LINE.match(line)
        if not match or match.group(1) != kind:
            continue
        fields = line.split("\t")
        sent_id = int(match.group(2))
        value = fields[2] if kind == "H" and len(fields) > 2 else fields[1] if kind != "H" else ""
        found.setdefault(sent_id, value)
    return found


def ordered(found: dict[int, str], expected: int | None = None) -> list[str]:
    """Values in id order; checks that ids are exactly 0..expected-1."""
    n = expected if expected is not None else len(found)
    missing = [i for i in range(n) if i not in found]
    if missing or len(found) != n:
        raise ValueError(
            f"generate output has {len(found)} sentences, expected {n} "
            f"(missing ids: {missing[:10]})"
        )
    return [found[i] for i in range(n)]
