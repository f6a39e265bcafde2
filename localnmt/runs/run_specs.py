"""What a run is, typed: :class:`TrainSpec` (what to train, on what, how it is launched) and
:class:`DecodeSpec` (how a test set is translated). Each field is written once, with its
command-line option (:mod:`localnmt.runs.options`): ``localnmt-train``, ``reproduce``,
``evaluate`` and ``localnmt-translate`` build their options from these fields, the
quickstart and ``reproduce`` fill them in from the catalog and the recipes, and the
fingerprints of training and translation steps are taken from them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from localnmt.errors import UsageError
from localnmt.runs.options import check_bounds, option, to_argv

PRECISIONS = ("fp16", "bf16")


@dataclass(frozen=True)
class TrainSpec:
    """Everything that decides one training command (the options of ``localnmt-train``)."""

    data: str = option(help="fairseq data-bin")
    save_dir: str = option(help="checkpoint directory")
    arch: str = option("localnmt_base", help="architecture (fairseq --arch)")
    size: str = option(
        "base", metavar="NAME", help="recipe of configs/recipes.yaml (base, big, cpu, tiny)"
    )
    max_tokens: int | None = option(
        None, minimum=1, help="tokens per GPU batch (default: recipe's)"
    )
    max_update: int | None = option(None, minimum=1, help="updates (default: recipe's)")
    layers: int | None = option(None, minimum=1, help="encoder and decoder layers")
    tokens_per_update: int | None = option(
        None, minimum=1, help="batch in tokens reached with --update-freq (default 32768)"
    )
    separate_vocab: bool = option(
        False, help="separate source/target dictionaries: share decoder embeddings only"
    )
    gpus: int | None = option(None, minimum=0, help="GPUs per node (default: all visible)")
    cpu: bool = option(False, help="train on the CPU")
    procs: int | None = option(
        None, minimum=1, help="with --cpu: training processes per node (gloo; default 1)"
    )
    precision: str | None = option(
        None, help="mixed precision", consts=(("--fp16", "fp16"), ("--bf16", "bf16"))
    )
    nnodes: int = option(1, minimum=1, help="nodes")
    node_rank: int = option(0, minimum=0, help="this node's rank")
    master_addr: str | None = option(None, help="address of the rank-0 node")
    master_port: int = option(29500, minimum=1, help="port of the rank-0 node")
    user_dir: str | None = option(
        "auto",
        help="plugin directory for fairseq; auto: this package when it imports; none",
        aliases=(("--no-user-dir", "none"),),
    )
    #: fairseq-train arguments, last (after ``--`` on the command line)
    extra: tuple[str, ...] = ()
    #: recipe fields replaced for this run (the quickstart's sizings), as (name, value) pairs
    recipe_overrides: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", tuple(self.extra))
        object.__setattr__(self, "recipe_overrides", tuple(self.recipe_overrides))
        if self.precision is not None:
            object.__setattr__(self, "precision", self.precision.lstrip("-"))
        check_bounds(self)
        if self.precision is not None and self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r} (valid: fp16, bf16)")
        if self.node_rank >= self.nnodes:
            raise UsageError(
                f"--node-rank {self.node_rank} needs --nnodes above it (got {self.nnodes})"
            )
        if self.cpu and self.gpus:
            raise UsageError(f"--cpu trains on the CPU, so --gpus {self.gpus} means nothing: "
                             "for several processes on CPUs give --procs N")  # fmt: skip
        if self.cpu and self.nnodes > 1 and self.procs is None:
            raise UsageError(f"--cpu with --nnodes {self.nnodes} needs --procs N (training "
                             "processes per node), or the nodes would train apart")  # fmt: skip
        if self.procs is not None and not self.cpu:
            raise UsageError("--procs is for --cpu (processes on CPUs); on GPUs, --gpus N "
                             "starts one process per GPU")  # fmt: skip

    def replace(self, **changes: Any) -> TrainSpec:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_argv(self) -> list[str]:
        """The ``localnmt-train`` options giving this spec (for printing and re-running)."""
        argv = to_argv(self, always=("data", "save_dir", "arch", "size"))
        return argv + (["--", *self.extra] if self.extra else [])

    def procs_per_node(self, gpus: int) -> int:
        """Training processes per node: one per GPU, ``procs`` on the CPU (default 1)."""
        return gpus if gpus > 0 else (self.procs or 1)

    def gpus_per_node(self) -> int:
        """0 on CPU, else ``gpus`` or the number of visible GPUs."""
        if self.cpu:
            return 0
        if self.gpus is not None:
            return self.gpus
        import torch

        return torch.cuda.device_count()


@dataclass(frozen=True)
class DecodeSpec:
    """How a test set is translated and its hypotheses made text again: beam search as the
    papers ran it (beam 4, length penalty 0.6), then subword removal and detokenisation."""

    beam: int = option(4, minimum=1, help="beam size")
    lenpen: float = option(0.6, help="length penalty")
    max_len_a: float = option(
        0.0, minimum=0, help="hypotheses end by max_len_a * source length + max_len_b"
    )
    max_len_b: int = option(200, minimum=1, help="see --max-len-a")
    max_tokens: int = option(8000, minimum=1, help="tokens per decoding batch")
    bpe: str | None = option(
        None, choices=("subword_nmt", "sentencepiece", "none"),
        help="subword removal (default: as the data-bin's localnmt_data.json records; else "
        "subword_nmt)",
    )  # fmt: skip
    detok: str | None = option(
        None, choices=("moses", "none"),
        help="detokeniser (default: as the data-bin's localnmt_data.json records; else moses)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_bounds(self)

    def generate_args(self) -> list[str]:
        """fairseq-generate's search options."""
        return ["--beam", str(self.beam), "--lenpen", str(self.lenpen),
                "--max-len-a", str(self.max_len_a), "--max-len-b", str(self.max_len_b),
                "--max-tokens", str(self.max_tokens)]  # fmt: skip

    def describe(self) -> str:
        """``beam 4, length penalty 0.6`` (for logs and reports)."""
        return f"beam {self.beam}, length penalty {self.lenpen:g}"

    def to_json(self) -> dict[str, Any]:
        """The fields, for fingerprints and reports."""
        return dataclasses.asdict(self)


#: beam search as the papers ran it (the default of every command that translates)
DEFAULT_DECODING = DecodeSpec()
