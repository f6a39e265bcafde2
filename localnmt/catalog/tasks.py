"""The tasks (language pairs, benchmarks) the papers' tables report on.

Every :class:`~localnmt.catalog.CatalogRow` names one task. A task says where its data comes
from (the data-prep command a user runs once), where ``scripts/reproduce.sh`` looks for it by
default (``<data-root>/<data_dir>``, data root ``runs/data``), how rows are scored, and the
batch size in tokens per update when a paper trained it with another batch than the recipes'
8 GPUs x 4096 tokens.

================  ===================  =====================================================
task              paper columns         scoring
================  ===================  =====================================================
wmt14_en_de       every paper           SacreBLEU / tokenized BLEU on newstest2014
wmt17_zh_en       Yang 2018 T1-5,       SacreBLEU on newstest2017 (newsdev2017 for the
                  Yang 2019 T2,         ablations Yang 2018 reports on the dev set)
                  Zhang 2021 T2
nist_zh_en        Zhang 2021 T2, F4     4-reference BLEU, lower-cased, averaged over
                                        MT03, MT04, MT05, MT06, MT08
wat17_ja_en       Yang 2019 T2          SacreBLEU on the ASPEC test set
wmt14_en_ru       Pande 2021 T1-3       SacreBLEU on newstest2014; 25K tokens per update
glue              Pande 2021 T4         dev accuracy of QQP, SST-2, MNLI, QNLI
================  ===================  =====================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCORINGS = ("bleu", "nist_multi_ref", "glue_accuracy")


@dataclass(frozen=True)
class Task:
    """One task of the papers' tables."""

    name: str
    label: str  # as a table header prints it, e.g. "WMT14 En→De"
    src: str
    tgt: str
    #: the command that builds the data; ``{work}`` stands for ``<data-root>/<name>``
    prep: str
    #: data-bin under the data root (GLUE: the folder of the per-task data-bins)
    data_dir: str
    scoring: str = "bleu"
    #: tokens per update the paper trained with (None: the recipes' 8 x 4096)
    tokens_per_update: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise ValueError(f"unknown scoring {self.scoring!r} (valid: {', '.join(SCORINGS)})")

    @property
    def is_translation(self) -> bool:
        """A sequence-to-sequence task trained with scripts/train.sh (all but GLUE)."""
        return self.scoring != "glue_accuracy"

    def work_dir(self, data_root: Path | str) -> Path:
        """Where the data-prep command writes: ``<data-root>/<name>``."""
        return Path(data_root) / self.name

    def default_data(self, data_root: Path | str) -> Path:
        """The default data location: ``<data-root>/<data_dir>``."""
        return Path(data_root) / self.data_dir

    def prep_command(self, data_root: Path | str) -> str:
        """The data-prep command, for messages."""
        return self.prep.format(work=self.work_dir(data_root))


#: GLUE tasks of Pande et al. Table 4, in the table's column order.
GLUE_TASKS = ("QQP", "SST-2", "MNLI", "QNLI")

TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task(
            "wmt14_en_de", "WMT14 En→De", "en", "de",
            "data_prep/prepare_wmt14_en_de.sh {work}/downloads {work}",
            "wmt14_en_de/data-bin",
        ),
        Task(
            "wmt17_zh_en", "WMT17 Zh→En", "zh", "en",
            "data_prep/prepare_wmt17_zh_en.sh {work}/downloads {work}  "
            "(UN v1.0 and CWMT need a manual download first)",
            "wmt17_zh_en/data-bin",
            note="separate Chinese/English vocabularies by default: trained with shared "
            "decoder input/output embeddings instead of all embeddings shared",
        ),
        Task(
            "nist_zh_en", "NIST Zh→En", "zh", "en",
            "data_prep/prepare_nist_zh_en.sh LDC_DIR NIST_DIR {work}  "
            "(LDC corpora and MT02-MT08 with 4 references, obtained from the LDC)",
            "nist_zh_en/data-bin",
            scoring="nist_multi_ref",
            note="case-insensitive 4-reference BLEU averaged over MT03-MT08 (refs/ next to "
            "the data-bin)",
        ),
        Task(
            "wat17_ja_en", "WAT17 Ja→En", "ja", "en",
            "data_prep/prepare_wat17_ja_en.sh ASPEC_JE_DIR {work}  "
            "(ASPEC-JE, distributed on request)",
            "wat17_ja_en/data-bin",
        ),
        Task(
            "wmt14_en_ru", "WMT14 En→Ru", "en", "ru",
            "data_prep/prepare_wmt_en_ru.sh {work}/downloads {work}  "
            "(Yandex 1M needs a manual download first)",
            "wmt14_en_ru/data-bin",
            tokens_per_update=25_000,
            note="Pande et al. 5.1: 25K tokens per update (gradient accumulation)",
        ),
        Task(
            "glue", "GLUE", "en", "en",
            "data_prep/prepare_pretrain_text.sh {work}/pretrain_text TEXT... -- --data-bin "
            "{work}/pretrain  (the user's English pre-training text), then "
            "data_prep/prepare_glue.sh GLUE_DIR {work}/pretrain_text/bpe.codes "
            "{work}/pretrain/dict.txt {work}",
            "glue",
            scoring="glue_accuracy",
            note="BERT-base pre-trained with scripts/roberta_pretrain.sh, fine-tuned per task "
            "with scripts/glue_finetune.sh",
        ),
    )
}  # fmt: skip

DEFAULT_TASK = "wmt14_en_de"


def get_task(name: str) -> Task:
    """The task named ``name``; a clear error naming the valid ones otherwise."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r} (valid: {', '.join(TASKS)})") from None
