"""The command line of ``reproduce``, typed: :class:`ReproduceOptions` is what :mod:`.cli`
parses and what planning, running and the results page read.

Options that are only reproduce's are declared here with :func:`localnmt.runs.options.option`
(flag, help, choices) and added to the parser from these declarations; the training and
decoding options are :class:`~localnmt.runs.run_specs.TrainSpec`'s and
:class:`~localnmt.runs.run_specs.DecodeSpec`'s own (``TRAIN_OPTIONS``, ``DECODE_OPTIONS``). The
positionals, ``--glue-tasks`` (a list) and the options whose help does not repeat their
default are plain fields, added by
:func:`localnmt.runs.reproduce.reproduce_cli.build_parser` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localnmt.catalog.tasks import GLUE_TASKS, TASKS
from localnmt.runs.options import option
from localnmt.runs.run_specs import DEFAULT_DECODING, DecodeSpec

#: the training options a table's rows take from the command line (the rest come from the
#: catalog and the recipes)
TRAIN_OPTIONS = ("max_update", "max_tokens", "layers", "gpus", "cpu", "precision")
#: the decoding options (``--max-tokens`` is the training batch here)
DECODE_OPTIONS = ("beam", "lenpen", "max_len_a", "max_len_b", "bpe", "detok")


@dataclass(frozen=True)
class ReproduceOptions:
    """Everything ``python -m localnmt.runs.reproduce PAPER TABLE ...`` was asked for."""

    paper: str
    table: str
    dry_run: bool = option(False, help="print the commands only")
    tiny: bool = option(False, help="tiny dims, few updates (smoke test)")
    task: str | None = option(
        None, choices=(*TASKS, "all"),
        help="the task (column) of a multi-task table; 'all': every one (default: the first)",
    )  # fmt: skip
    data: str | None = option(None, help="data-bin (GLUE: the folder with pretrain/ and the tasks)")
    data_root: str = "runs/data"  # default data: <data-root>/<task>/data-bin
    pair: str | None = option(
        None, choices=("en-de", "en-zh"),
        help="train on the embedded gettext corpus of this pair (--tiny without data: en-de)",
    )  # fmt: skip
    max_train: int | None = option(None, help="")
    bpe_merges: int | None = option(None, help="")
    subset: str | None = option(
        None, help="subset to score (default: the rows' split, test or valid)"
    )
    ref: str | None = option(None, help="raw references (default: <data>/../raw/<subset>.<tgt>)")
    src: str | None = option(None, help="raw sources (default: <data>/../raw/<subset>.<src>)")
    score_against_targets: bool = option(
        False,
        help="when the raw references are missing, score against fairseq's post-processed "
        "target lines (noted on the page; not comparable to published SacreBLEU)",
    )
    refs_dir: str | None = option(None, help="NIST references (default: <data>/../refs)")
    catalog_json: Path | None = option(
        None, help="rows from this file (the catalog's --json format)"
    )
    baseline: str | None = option(None, help="catalog name of the baseline row")
    workdir: str = "runs/reproduce"
    results_dir: str = "results"
    # training: TrainSpec's options (TRAIN_OPTIONS); cpu is decided when parsing (no --gpus
    # and no GPU visible: the CPU)
    max_update: int | None = None
    max_tokens: int | None = None
    layers: int | None = None
    gpus: int | None = None
    cpu: bool = False
    precision: str | None = None
    average: int | None = option(None, help="checkpoints to average (default: recipe's)")
    #: decoding: DecodeSpec's options (DECODE_OPTIONS)
    decode: DecodeSpec = DEFAULT_DECODING
    rescore: bool = option(False, help="re-evaluate even if scores exist")
    glue_tasks: tuple[str, ...] = GLUE_TASKS
    glue_grid: bool = False
    #: fairseq-train arguments (after ``--``)
    extra: tuple[str, ...] = ()

    def single_task_flags(self) -> list[str]:
        """The given options that name the data of one task (refused with ``--task all``)."""
        given = (("--data", self.data), ("--ref", self.ref), ("--src", self.src),
                 ("--refs-dir", self.refs_dir), ("--pair", self.pair))  # fmt: skip
        return [flag for flag, value in given if value]
