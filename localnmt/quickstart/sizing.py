"""How big the quickstart's models are, per device, and which systems it compares.

The quickstart trains every system for an equal share of a wall-clock budget, so the sizes are
chosen for the device: on a 2-core CPU a model that makes about a thousand updates in a few
minutes and still reaches double-digit BLEU on the gettext corpus (the sweep behind the choice
is in ``docs/quickstart.md``); on a GPU a base-width model with fp16 and more systems.
Presets that name layers 1–3 (Localness, CSAN) need at least three encoder layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sizing:
    """Model, vocabulary, batch and schedule of one device class."""

    device: str
    embed_dim: int
    ffn_dim: int
    heads: int
    layers: int
    bpe_merges: int
    max_tokens: int
    lr: float
    warmup: int
    dropout: float
    budget_minutes: float
    systems: tuple[str, ...]
    precision: tuple[str, ...] = field(default_factory=tuple)

    def fairseq_args(self) -> list[str]:
        """fairseq-train overrides, given after the ``cpu`` recipe's arguments."""
        args: list[str] = []
        for side in ("encoder", "decoder"):
            args += [f"--{side}-embed-dim", str(self.embed_dim),
                     f"--{side}-ffn-embed-dim", str(self.ffn_dim),
                     f"--{side}-attention-heads", str(self.heads),
                     f"--{side}-layers", str(self.layers)]  # fmt: skip
        return [
            *args,
            "--max-tokens", str(self.max_tokens),
            "--lr", str(self.lr),
            "--warmup-updates", str(self.warmup),
            "--dropout", str(self.dropout),
            *self.precision,
        ]  # fmt: skip

    def describe(self) -> str:
        """One line for logs and the report."""
        return (
            f"{self.embed_dim}-dim {self.layers}+{self.layers}-layer Transformer "
            f"({self.heads} heads, FFN {self.ffn_dim}), {self.bpe_merges} BPE merges, "
            f"{self.max_tokens}-token batches, lr {self.lr:g}, {self.warmup} warm-up updates, "
            f"dropout {self.dropout:g}{', ' + ' '.join(self.precision) if self.precision else ''}"
        )


BASELINE = "vaswani2017/table-3/transformer-base/base"
CPU_SYSTEMS = (
    BASELINE,
    "yang2018/table-4/localness/base",
    "zhang2021/table-2/our-method/base",
)
GPU_SYSTEMS = (
    *CPU_SYSTEMS,
    "yang2019/table-2/csans-base/base",
    "shaw2018/table-1/relative-k-16/base",
    "pande2021/table-1/2locheads-all6-b/base",
)

CPU = Sizing(
    device="cpu",
    embed_dim=128,
    ffn_dim=512,
    heads=4,
    layers=3,
    bpe_merges=4000,
    max_tokens=1024,
    lr=2e-3,
    warmup=200,
    dropout=0.1,
    budget_minutes=24.0,
    systems=CPU_SYSTEMS,
)
GPU = Sizing(
    device="cuda",
    embed_dim=512,
    ffn_dim=2048,
    heads=8,
    layers=6,
    bpe_merges=8000,
    max_tokens=4096,
    lr=7e-4,
    warmup=1000,
    dropout=0.3,
    budget_minutes=30.0,
    systems=GPU_SYSTEMS,
    precision=("--fp16",),
)


def sizing_for(cuda: bool) -> Sizing:
    """The GPU sizing when CUDA is available, else the CPU one."""
    return GPU if cuda else CPU

# Smoke tests: seconds per system, still 3 layers so that presets naming layers 1–3 fit.
TINY = Sizing(
    device="cpu",
    embed_dim=32,
    ffn_dim=64,
    heads=4,
    layers=3,
    bpe_merges=200,
    max_tokens=1024,
    lr=2e-3,
    warmup=20,
    dropout=0.1,
    budget_minutes=1.0,
    systems=CPU_SYSTEMS[:2],
)

SIZINGS: dict[str, Sizing] = {"cpu": CPU, "cuda": GPU, "tiny": TINY}
