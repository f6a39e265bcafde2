"""Reproduce one table of a paper: train each catalog row, evaluate, write a results page.

    python -m localnmt.runs.reproduce yang2019 "Table 1" --tiny
    python -m localnmt.runs.reproduce yang2018 "Table 4" --data data-bin/wmt14_en_de \\
        --gpus 8 --fp16
    python -m localnmt.runs.reproduce zhang2021 "Table 2" --task nist_zh_en

**Tasks.** Every catalog row belongs to a task (``localnmt.catalog.tasks``: WMT14 En→De,
WMT17 Zh→En, NIST Zh→En, WAT17 Ja→En, WMT14 En→Ru, GLUE). A table with several columns
(language pairs) has rows of several tasks: ``--task NAME`` picks one, ``--task all`` runs
each in turn (one page per task); without ``--task`` the table's first task (its first
column in the catalog, WMT14 En→De where the table has one) runs, and the others are named.
An unknown paper or table stops with the valid choices.

**Data.** ``--data`` (or ``--pair en-de|en-zh``: the embedded gettext corpus); else the task's
default directory under ``--data-root`` (``runs/data/<task>/data-bin``) when it exists; else,
with ``--tiny``, the gettext corpus (en-de; translation tasks only); else the run stops before
any training with the data-prep command to run. Every selected task's data is checked before
the first row trains.

**References.** BLEU is scored against the raw text kept beside the data-bin,
``<data-bin>/../raw/<subset>.<tgt>`` (``--ref`` overrides). When it is missing the run stops
before training, naming the file, unless ``--score-against-targets`` accepts fairseq's
post-processed target lines (said on the page).

**Translation rows** train with ``localnmt-train --arch <row.arch> --size <row.size|tiny> --
<row.args>`` (``--tokens-per-update`` from the task, e.g. 25K for En→Ru;
``--separate-vocab`` when the data-bin has separate source/target dictionaries), average the
last checkpoints (recipe default), then ``evaluate`` on the row's split (``test``, or
``valid`` for the papers' dev-set ablations; ``--subset`` overrides). The baseline of each
row (same size, vanilla Transformer) is evaluated first and used for Δ and the bootstrap
test. NIST Zh→En decodes the five test subsets and reports the MT03–MT08 average of
4-reference, lower-cased BLEU (``localnmt.runs.nist_eval``). Finished steps are reused when
their settings and inputs are unchanged (``localnmt.steps`` fingerprints in
``<workdir>/<table>[_<task>]/<row>/.done/``): training is keyed by the data's contents, arch,
recipe and every fairseq argument, evaluation by the trained run, the contents of the
checkpoint, references and baseline hypotheses, and the decoding options
(docs/orchestration.md).

**GLUE rows** (Pande et al. Table 4) pre-train with ``localnmt.runs.roberta_pretrain`` and
fine-tune per task with ``localnmt.runs.glue_finetune`` (``localnmt.runs.glue_runs``),
reporting dev accuracy per task.

Modules: :mod:`.plan` (tasks, data, references), :mod:`.run` (train and evaluate rows),
:mod:`.page` (the results page), :mod:`.cli` (options, dry run, dispatch).
"""

from localnmt.runs.reproduce.plan import Plan, plan_task, separate_vocab
from localnmt.runs.reproduce.reproduce_cli import main, parse_args, reproduce
from localnmt.runs.reproduce.reproduce_options import ReproduceOptions
from localnmt.runs.reproduce.table_runs import row_spec, run_row

__all__ = [
    "Plan",
    "ReproduceOptions",
    "main",
    "parse_args",
    "plan_task",
    "reproduce",
    "row_spec",
    "run_row",
    "separate_vocab",
]
