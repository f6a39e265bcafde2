"""Where GMM cross-attention's beam-search time goes: the model taken apart, A/B in one process.

    python -m bench.gmm_decoding [--length 32] [--repeats 7]

Beam search (``bench.generation``: 8 sentences, beam 4, exactly T steps) with the fairseq
baseline and the GMM row's model (``zhang2021/table-2/our-method/base`` by default) in seven
forms: the full model (the decoding step in one C call, ``fast/native/gmm_step.py``, where it
is built, the predictors computed in it; the first step and cross-attention keys once per
sentence, ``attention/shared_source.py``; each layer's step kept as a plan after the first,
``attention/step_plan.py``); the full model without step plans; the full model with the
predictors' outputs from
torch's ``F.linear`` before the C call; the full model with torch ops only; the full model run
per hypothesis, as fairseq does; every layer on the dense path with ``post`` returning the
softmax unchanged (what remains is the reference path the modifier needs for probabilities);
and the same with ``post`` running only the predictors (eq. 7-9, 14). Prints seconds per batch
and the difference of each form to the baseline: "full, torch ops" − predictors-only is what
eq. 6 and 10-13 cost as torch ops.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

from bench.generation import Generator
from bench.machine_info import describe, machine_info
from bench.measure import interleaved, switched
from bench.models import build_baseline, build_candidate, parse_model_args, size_overrides
from bench.synthetic import make_batch, make_dictionary
from localnmt.attention import shared_source, step_plan
from localnmt.attention.fast import gmm_mixture
from localnmt.attention.fast.native import gmm_step
from localnmt.attention.methods.gmm import GaussianMixture
from localnmt.machine import load_average
from localnmt.runs.run_specs import DEFAULT_DECODING


def _softmax_unchanged(self: GaussianMixture, ctx, probs):
    return probs


def _predictors_only(self: GaussianMixture, ctx, probs):
    self.predictors.outputs(ctx.q, ctx.q.size(-1) ** 0.5, reuse=ctx.incremental)
    return probs


def _no_fused_step(self: GaussianMixture, ctx, problem):
    return None


#: form name: (post, whether the C step may run, whether beam search's shared source is used:
#: the first step once per sentence, cross-attention keys once per sentence;
#: attention/shared_source.py; whether the C step computes the predictors; whether decoding
#: steps may run kept plans, attention/step_plan.py). A form with a post of its own takes every
#: layer's step to the dense path (no fused_output), so that post runs there.
FORMS = {"full": (None, True, True, True, True),
         "full, no step plans": (None, True, True, True, False),
         "full, predictors by torch": (None, True, True, False, True),
         "full, torch ops": (None, False, True, True, True),
         "full, per hypothesis": (None, True, False, True, True),
         "reference path only": (_softmax_unchanged, False, True, True, True),
         "+ predictors": (_predictors_only, False, True, True, True)}  # fmt: skip


def take_apart(row_name: str, length: int, sentences: int, repeats: int, vocab: int,
               dims: tuple[int, int] = (512, 2048)) -> dict:  # fmt: skip
    """Median seconds per beam-search batch of the baseline and of each form of the model
    (``dims``: embedding and FFN sizes)."""
    from localnmt.catalog import all_rows

    row = next(r for r in all_rows() if r.name == row_name)
    dictionary = make_dictionary(vocab)
    ns = parse_model_args(row.arch, row.args, size_overrides(*dims))
    batch = make_batch(dictionary, sentences, length)
    device = torch.device("cpu")
    base = Generator(build_baseline(ns, dictionary), dictionary, device, torch.float32,
                     beam=DEFAULT_DECODING.beam, steps=length)  # fmt: skip
    cand = Generator(build_candidate(ns, dictionary), dictionary, device, torch.float32,
                     beam=DEFAULT_DECODING.beam, steps=length)  # fmt: skip
    original, fused = GaussianMixture.post, gmm_step.ENABLED
    original_step = GaussianMixture.fused_output

    def form(post: Callable | None, c_step: bool, shared: bool, predictors_in_c: bool,
             plans: bool) -> Callable[[], object]:  # fmt: skip
        settings = [(GaussianMixture, "post", post or original),
                    (GaussianMixture, "fused_output", original_step if post is None
                     else _no_fused_step),
                    (gmm_step, "ENABLED", fused and c_step),
                    (gmm_mixture, "PREDICTORS_IN_C", predictors_in_c),
                    (shared_source, "ENABLED", shared),
                    (step_plan, "ENABLED", plans)]  # fmt: skip

        def run() -> object:
            with switched(settings):
                return cand.run(batch)

        return run

    fns = {"baseline": lambda: base.run(batch)}
    fns.update({name: form(*how) for name, how in FORMS.items()})
    times = interleaved(fns, device, warmup=1, repeats=repeats)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--row", default="zhang2021/table-2/our-method/base")
    p.add_argument("--length", type=int, default=32)
    p.add_argument("--sentences", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    print(describe(machine_info(torch.device("cpu"))), flush=True)
    med = take_apart(args.row, args.length, args.sentences, args.repeats, args.vocab)
    base = med["baseline"]
    print(
        f"\n{args.row}, T = {args.length}, {args.sentences} sentences, beam "
        f"{DEFAULT_DECODING.beam}\n"
    )
    print("| form | s per batch | − baseline, ms | speed ÷ baseline |\n|---|---|---|---|")
    for name, seconds in med.items():
        print(f"| {name} | {seconds:.3f} | {1e3 * (seconds - base):+.0f} | {base / seconds:.3f} |")
    print()
    c_step = "C step" if gmm_step.ENABLED else "C step not built: torch ops"
    eq = med["full, torch ops"] - med["+ predictors"]
    print(f"eq. 6 and 10-13 as torch ops (full, torch ops − predictors-only): {1e3 * eq:+.0f} ms "
          f"per batch; {c_step} in the full form")  # fmt: skip
    load = load_average()
    print(f"load {load[0]:.1f} at the end" if load else "load unknown")


if __name__ == "__main__":
    main()
