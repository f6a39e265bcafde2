"""A transformers MarianMT model with each method family against the same model on ``sdpa``.

For each family a Marian model is built from one config and seed; the reference is a copy
with transformers' ``sdpa`` attention and the same weights (the methods' own parameters
aside). Both run a training step (forward, backward, no optimiser) and a greedy ``generate``
on the same right-padded batch, A/B interleaved in one process; the ratio is
``sdpa time / method time`` (1.0 = as fast; the issue's target is ≥ 0.9 on the CPU)::

    python -m bench.hf_attention --dim 128 --layers 2 --batch 16 --length 30 --repeats 5
    python -m bench.hf_attention --dim 512 --layers 6 --placement papers
    python -m bench.hf_attention --device cuda --dtype bfloat16 --dim 512 --layers 6

``--beams N`` generates with beam search of width N instead of greedy search.

``--placement all`` (the default) gives every layer of the family's site the method;
``papers`` places it as the papers' rows do (the catalog presets): Yang et al. 2018 / 2019
put Localness, CSAN and the methods CSAN compares with in the lowest three encoder layers;
relative positions, local heads, tied Wq/Wk, GMM and the hard-coded Gaussian take every
layer of their sites.

``--without KERNEL`` adds the columns of each method model with that kernel taken out of its
registry, interleaved with the others (e.g. ``--families gmm --without gmm_c_attention``: GMM's
decoding step in one C call against the dense path it replaces); it also turns off a named
path inside a kernel (``gmm_predictors_in_c``: the C decoding step reads the predictors'
outputs from torch instead of computing them; ``gmm_output_layer_in_c``: the predictors'
output layer in training as torch's GEMMs; ``step_shortcuts``: every decoding step through the
whole pipeline, without the kept plans of cross-attention and relative positions' shortcut;
``prepared_kernels``: the plans and relative positions' shortcut dispatch every step instead
of running the kernel prepared at their first step).

``--work`` adds the ratio of the two models' matrix-product work (``sdpa`` model ÷ method
model, the multiply-adds of ``mm`` / ``addmm`` that ``torch.utils.flop_counter`` counts: the
linear layers, the methods' own included; attention's products are left out on both sides,
as the C kernels' arithmetic is not counted): the speed ratio a method would have if nothing
but those products took time. A method with parameters of its own (BLOCK's summaries and
gate, GMM's predictors) cannot reach 1.0 by that measure, whatever its kernels do.

``--control`` first times a copy of the ``sdpa`` model against the ``sdpa`` model (row
``sdpa_copy``): a method exactly as fast as ``sdpa`` reads that, not 1.00, in the same run.
``--spread`` adds the first and third quartile of each column's paired ratios: on a shared
or virtual machine the median of a few repeats moves by several hundredths between runs.

On a GPU both models run under autocast to ``--dtype`` (float32 parameters, as mixed-precision
training does).
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Callable

import torch

from bench.measure import interleaved, median_ratio, ratio_quartiles, switched
from localnmt.attention import dispatch

#: One spec per method family, at a site it applies to.
FAMILIES = {
    "localness": {"encoder_self": "localness[window=query]"},
    "rel_pos": {"encoder_self": "rel_pos[clip=16]", "decoder_self": "rel_pos[clip=16]"},
    "csan_1d": {"encoder_self": "csan_1d[window=5]"},
    "csan_2d": {"encoder_self": "csan_2d[window=3,area_heads=3]"},
    "block": {"encoder_self": "block"},
    "bi_direct": {"encoder_self": "bi_direct"},
    "neighbor": {"encoder_self": "neighbor"},
    "local_hard": {"encoder_self": "local_hard"},
    "local_heads": {"encoder_self": "local_heads[masks=prev1;next1;band2;global]"},
    "tied_qk": {"encoder_self": "tied_qk[groups=2]"},
    "gmm": {"cross": "gmm[k=4]"},
    "hardcoded_gaussian": {"cross": "hardcoded_gaussian"},
}


#: ``--control``'s row: a copy of the ``sdpa`` model, no method (the run's own noise floor).
CONTROL = "sdpa_copy"

#: The families the papers place in the lowest three encoder layers (Yang et al. 2018, Table 1;
#: Yang et al. 2019, Table 1).
LOWER_THREE = ("localness", "csan_1d", "csan_2d", "block", "bi_direct", "neighbor", "local_hard")


def placed(family: str, placement: str, layers: int = 6) -> dict[str, str]:
    """The family's specs for :func:`localnmt.hf.apply`: on every layer, or as the papers
    place it (``layers=1-3`` in the encoder for :data:`LOWER_THREE`; all of a model with
    fewer ``layers``)."""
    specs = FAMILIES[family]
    if placement == "all" or family not in LOWER_THREE:
        return specs
    name, _, rest = specs["encoder_self"].partition("[")
    options = f"layers=1-{min(3, layers)}" + ("," + rest if rest else "]")
    return {"encoder_self": f"{name}[{options}"}


def build(args: argparse.Namespace):
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=1000, d_model=args.dim, encoder_layers=args.layers,
        decoder_layers=args.layers, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=4 * args.dim, decoder_ffn_dim=4 * args.dim,
        max_position_embeddings=args.length + args.new_tokens + 2, pad_token_id=0,
        eos_token_id=1, decoder_start_token_id=0, attn_implementation="sdpa",
    )  # fmt: skip
    torch.manual_seed(0)
    return MarianMTModel(config)


def batch(args: argparse.Namespace) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.length // 2, args.length + 1, (args.batch,), generator=gen)
    ids = torch.randint(3, 1000, (args.batch, args.length), generator=gen)
    ids = ids.masked_fill(torch.arange(args.length)[None] >= lengths[:, None], 0)
    labels = torch.randint(3, 1000, (args.batch, args.length), generator=gen)
    return {"input_ids": ids, "attention_mask": ids.ne(0).long(), "labels": labels}


def step_and_generate(model, inputs: dict[str, torch.Tensor], new_tokens: int,
                      dtype: torch.dtype = torch.float32, beams: int = 1):  # fmt: skip
    device = inputs["input_ids"].device
    low = dtype != torch.float32

    def step() -> None:
        model.train()
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=low):
            loss = model(**inputs).loss
        loss.backward()

    def generate() -> None:
        model.eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=dtype, enabled=low):
            model.generate(
                input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                max_new_tokens=new_tokens, min_new_tokens=new_tokens, num_beams=beams,
                do_sample=False,
            )  # fmt: skip

    return step, generate


#: The operations whose work ``--work`` counts (matrix products of the linear layers).
WORK_OPS = ("mm", "addmm")


def matrix_work(fn: Callable[[], None]) -> int:
    """Multiply-add FLOPs of :data:`WORK_OPS` in one ``fn()`` (torch's FLOP counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    counts = counter.get_flop_counts().get("Global", {})
    return sum(n for op, n in counts.items() if str(op).split(".")[1] in WORK_OPS)


def work_ratio(reference: Callable[[], None], method: Callable[[], None]) -> float:
    """``matrix_work(reference) / matrix_work(method)``."""
    return matrix_work(reference) / matrix_work(method)


def _spread(reference: list[float], method: list[float]) -> str:
    """``q1-q3`` of the paired ratios ``reference / method``."""
    first, third = ratio_quartiles(reference, method)
    return f"{first:.2f}-{third:.2f}"


def _paths() -> dict[str, tuple[object, str]]:
    """Code paths inside a kernel or a method that ``--without`` can turn off as well: name →
    (module, switch)."""
    from localnmt.attention import step_plan
    from localnmt.attention.fast import gmm_mixture
    from localnmt.attention.fast.autograd import predictor_gemms

    return {"gmm_predictors_in_c": (gmm_mixture, "PREDICTORS_IN_C"),
            "gmm_output_layer_in_c": (predictor_gemms, "HEAD_IN_C"),
            "step_shortcuts": (step_plan, "ENABLED"),
            "prepared_kernels": (dispatch, "PREPARED")}  # fmt: skip


def without(fn: Callable[[], None], name: str) -> Callable[[], None]:
    """``fn`` run with kernel ``name`` out of its registry, or the named path (:func:`_paths`)
    turned off (``--without``)."""
    paths = _paths()

    def run() -> None:
        if name in paths:
            module, switch = paths[name]
            with switched([(module, switch, False)]):
                fn()
            return
        with dispatch.kernel_removed(name):
            fn()

    return run


def kernel_names() -> list[str]:
    return [n for r in dispatch.registries() for n in r.names()] + list(_paths())


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and batch of :func:`build` and :func:`batch` (also ``bench.hf_calls``'s)."""
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=30)
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))


def main(argv: list[str] | None = None) -> None:
    import localnmt.hf

    parser = argparse.ArgumentParser(description=__doc__)
    add_model_arguments(parser)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--beams", type=int, default=1,
                        help="generate with beam search of this width (1: greedy)")  # fmt: skip
    parser.add_argument("--placement", choices=("all", "papers"), default="all")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    parser.add_argument("--without", metavar="KERNEL", choices=kernel_names(), default=None,
                        help="also time each method model with this kernel out of its registry "
                        "(the columns 'without'), interleaved with the others")  # fmt: skip
    parser.add_argument("--work", action="store_true",
                        help="also print each pair's ratio of matrix-product work (columns "
                        "'work': the speed ratio if only the linear layers took time)")  # fmt: skip
    parser.add_argument("--control", action="store_true",
                        help="first time a copy of the sdpa model against it (row "
                        "'sdpa_copy'): what a method as fast as sdpa reads")  # fmt: skip
    parser.add_argument("--spread", action="store_true",
                        help="also print the first and third quartile of each column's paired "
                        "ratios (columns 'spread')")  # fmt: skip
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    inputs = {name: t.to(device) for name, t in batch(args).items()}
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    policy = os.environ.get("OMP_WAIT_POLICY") or "torch's default"
    print(f"{where}, {args.dtype}, {args.dim}-dim, {args.layers}+{args.layers} layers, "
          f"placement {args.placement}, beams {args.beams}, load {os.getloadavg()[0]:.2f}, "
          f"torch threads {torch.get_num_threads()} (OpenMP wait policy: {policy})")  # fmt: skip
    print(f"{'family':20s} {'train step':>10s} {'generate':>10s}   (sdpa time / method time)")
    for family in ([CONTROL] if args.control else []) + args.families:
        reference = build(args).to(device)
        model = copy.deepcopy(reference)
        if family != CONTROL:
            model = localnmt.hf.apply(model, **placed(family, args.placement, args.layers))
        ref_step, ref_gen = step_and_generate(reference, inputs, args.new_tokens, dtype,
                                              args.beams)  # fmt: skip
        step, gen = step_and_generate(model, inputs, args.new_tokens, dtype, args.beams)
        steps, gens = {"ref": ref_step, "m": step}, {"ref": ref_gen, "m": gen}
        if args.without and family != CONTROL:
            steps["w"], gens["w"] = (without(fn, args.without) for fn in (step, gen))
        t = interleaved(steps, device, warmup=1, repeats=args.repeats)
        g = interleaved(gens, device, warmup=1, repeats=args.repeats)
        line = f"{family:20s} {median_ratio(t['ref'], t['m']):10.2f} "
        line += f"{median_ratio(g['ref'], g['m']):10.2f}"
        if args.spread:
            line += "   spread: " + " ".join(_spread(c["ref"], c["m"]) for c in (t, g))
        if "w" in t:
            line += f"   without: {median_ratio(t['ref'], t['w']):.2f} "
            line += f"{median_ratio(g['ref'], g['w']):.2f}"
        if args.work:
            line += f"   work: {work_ratio(ref_step, step):.2f} {work_ratio(ref_gen, gen):.2f}"
        print(line)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
