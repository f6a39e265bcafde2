"""Where GMM cross-attention's training time goes: the step taken apart, A/B in one process.

    python -m bench.gmm_training [--length 64] [--repeats 9] [--forms full "SDPA only"]
                                 [--clock cpu] [--size base|cpu]

One training step (``bench.training_throughput``: forward, label-smoothed cross-entropy,
backward, Adam; 1024 target tokens) of the fairseq baseline and of the GMM row's model
(``zhang2021/table-2/our-method/base`` by default) in these forms:

- full: eq. 13 as γ = lerp(α, β, g) from explicit α on the dense path (the default,
  ``gmm.AFFINE_ON_CPU`` off), eq. 6 and 10-14 in C (``fast/native/c_gmm_mixture.py``, where it is
  built), the predictors' hand-written backward (``fast/autograd/predictor_gemms.py``);
- "affine": eq. 13 as ``(1 − g)·(α @ V) + (g·β) @ V`` with α @ V from fused SDPA
  (``GaussianMixture.affine_post``, what ``gmm.AFFINE_ON_CPU`` turns on);
- each of the two others off in turn: "torch ops" (eq. 6 and 10-14 as torch ops),
  "autograd predictors" (``F.linear``);
- "both off": torch ops and autograd predictors together (the code before the C mixture and
  the hand-written backward);
- "own thread pool": as full, but the C calls run on one thread each, split among a pool of
  the wrappers' own instead of torch's OpenMP team (what runs where the extension is not bound
  to torch's OpenMP runtime; ``csrc/builds.h``);
- "torch output layer": as full, but the predictors' sigmoid and block-diagonal output layer
  as torch ops and GEMMs instead of C (``fast/native/c_bank_head.py``);
- "SDPA only": ``post_affine`` keeping α alone (no predictors, no mixture), and
  "+ predictors": the same after running the predictors: full − "+ predictors" is what eq. 6
  and 10-14 cost, "+ predictors" − "SDPA only" what the predictors cost, in every decoder
  layer but the last: fairseq's decoder asks its last layer's cross-attention for attention
  weights (its alignment layer), so that layer takes the dense path with the whole method
  (and the baseline its explicit softmax) in every form.

Prints seconds per step and each form's speed relative to the baseline (median over the
repeats of the paired ratios, as ``bench.run``); ``--clock cpu`` counts the process's CPU
seconds instead of wall seconds (``bench/measure.py``).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

from bench.machine_info import describe, machine_info
from bench.measure import CLOCKS, interleaved, median_ratio, switched, use_clock
from bench.models import build_baseline, build_candidate, parse_model_args, size_overrides
from bench.synthetic import batch_size_for, make_batch, make_dictionary
from bench.training_throughput import Trainer
from localnmt.attention.context import AffinePost
from localnmt.attention.fast.autograd import predictor_gemms as gmm_predictors
from localnmt.attention.fast.native import c_bank_head, c_gmm_mixture
from localnmt.attention.methods.gmm import GaussianMixture
from localnmt.machine import load_average


def _affine(self: GaussianMixture, ctx) -> AffinePost | None:
    return self.affine_post(ctx)


def _sdpa_only(self: GaussianMixture, ctx) -> AffinePost:
    return AffinePost(1.0, None)


def _predictors_only(self: GaussianMixture, ctx) -> AffinePost:
    outputs = self.predictors.outputs(ctx.q, ctx.q.size(-1) ** 0.5)
    return AffinePost(1.0 + 0.0 * outputs[..., :1], None)  # keeps their backward in the step


#: form name: (post_affine replacement, C mixture allowed, predictors' backward allowed,
#: C calls on torch's OpenMP team where bound to it, predictors' output layer in C)
FORMS = {"full": (None, True, True, True, True), "affine": (_affine, True, True, True, True),
         "torch ops": (None, False, True, True, True),
         "autograd predictors": (None, True, False, True, True),
         "both off": (None, False, False, True, True),
         "own thread pool": (None, True, True, False, True),
         "torch output layer": (None, True, True, True, False),
         "SDPA only": (_sdpa_only, True, True, True, True),
         "+ predictors": (_predictors_only, True, True, True, True)}  # fmt: skip


def model_size(size: str) -> list[str]:
    """The flags of a model size: ``base`` (512-dim, the row's layers and heads) or ``cpu``
    (the quickstart's CPU sizing: its dims, heads and layers)."""
    if size == "base":
        return size_overrides(512, 2048)
    from localnmt.quickstart.sizing import sizings

    embed, ffn, heads, layers = sizings()["cpu"].effective().dims
    return [*size_overrides(embed, ffn),
            *(f"--{side}-{what}={n}" for side in ("encoder", "decoder")
              for what, n in (("attention-heads", heads), ("layers", layers)))]  # fmt: skip


def take_apart(
    row_name: str, length: int, max_tokens: int, repeats: int, vocab: int, forms: list[str],
    size: str = "base",
) -> dict:  # fmt: skip
    """Seconds per training step of the baseline and of each form in ``forms``."""
    from localnmt.catalog import all_rows

    row = next(r for r in all_rows() if r.name == row_name)
    dictionary = make_dictionary(vocab)
    ns = parse_model_args(row.arch, row.args, model_size(size))
    batch = make_batch(dictionary, batch_size_for(max_tokens, length), length)
    device = torch.device("cpu")
    torch.manual_seed(0)
    base = Trainer(build_baseline(ns, dictionary), device, torch.float32)
    cand = Trainer(build_candidate(ns, dictionary), device, torch.float32)
    original, built = GaussianMixture.post_affine, c_gmm_mixture.ENABLED

    team = c_gmm_mixture.TEAM

    def form(post_affine: Callable | None, c_mixture: bool, predictors: bool, on_team: bool,
             head_in_c: bool):  # fmt: skip
        settings = [(GaussianMixture, "post_affine", post_affine or original),
                    (c_gmm_mixture, "ENABLED", built and c_mixture),
                    (gmm_predictors, "ENABLED", predictors),
                    (gmm_predictors, "HEAD_IN_C", head_in_c),
                    (c_gmm_mixture, "TEAM", team and on_team),
                    (c_bank_head, "TEAM", team and on_team)]  # fmt: skip

        def run() -> object:
            with switched(settings):
                if team and not on_team:
                    c_gmm_mixture._gmm_mixture.use_team(False)
                try:
                    return cand.step(batch)
                finally:
                    if team and not on_team:
                        c_gmm_mixture._gmm_mixture.use_team(True)

        return run

    fns = {"baseline": lambda: base.step(batch)}
    fns.update({name: form(*FORMS[name]) for name in forms})
    return interleaved(fns, device, warmup=2, repeats=repeats)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--row", default="zhang2021/table-2/our-method/base")
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--size", choices=("base", "cpu"), default="base",
                   help="base (512-dim) or the quickstart's CPU sizing (128-dim, "
                   "3+3 layers)")  # fmt: skip
    p.add_argument(
        "--forms",
        nargs="+",
        choices=list(FORMS),
        default=list(FORMS),
        metavar="FORM",
        help=f"forms to time (default all: {', '.join(FORMS)})",
    )
    p.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="wall seconds (default) or the process's CPU seconds",
    )
    args = p.parse_args(argv)
    use_clock(args.clock)
    print(describe(machine_info(torch.device("cpu"))), flush=True)
    times = take_apart(args.row, args.length, args.max_tokens, args.repeats, args.vocab, args.forms,
                       args.size)  # fmt: skip
    base = times["baseline"]
    print(
        f"\n{args.row}, {args.size} size, training step, T = {args.length}, "
        f"{args.max_tokens} tokens, "
        f"{args.clock} clock\n"
    )
    print("| form | s per step | − baseline, ms | speed ÷ baseline |\n|---|---|---|---|")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        delta = 1e3 * (median - statistics.median(base))
        print(f"| {name} | {median:.3f} | {delta:+.0f} | {median_ratio(base, seconds):.3f} |")
    if not c_gmm_mixture.ENABLED:
        print("\n(the C extension is not built: full and torch ops are the same code)")
    elif not c_gmm_mixture.TEAM:
        print("\n(the C kernels do not run on torch's OpenMP team here: full and own thread pool"
              " are the same code)")  # fmt: skip
    load = load_average()
    print(f"\nload {load[0]:.1f} at the end" if load else "\nload unknown")


if __name__ == "__main__":
    main()
