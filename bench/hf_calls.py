"""One attention call of a transformers model: localnmt's function against transformers' ``sdpa``.

For each family (the models of :mod:`bench.hf_attention`, the method on every layer of its
sites) the arguments transformers hands the attention function are kept from one greedy
``generate`` (a decoding step: one query, the longest cache) and one teacher-forced forward
(a whole sequence), per site; then :func:`localnmt.hf.attention.localnmt_attention` and
transformers' ``sdpa_attention_forward`` are timed on the very same arguments, interleaved in
one process, ``--calls`` calls per timing, no gradients. The columns are microseconds per call
(median over repeats) and their ratio (``sdpa / localnmt``). Where a method gives fewer
query and key groups than heads (tied Wq/Wk) transformers' function gets them repeated to
every head::

    python -m bench.hf_calls
    python -m bench.hf_calls --families rel_pos gmm --dim 512 --layers 6
    python -m bench.hf_calls --families gmm --without step_shortcuts

:mod:`bench.hf_attention` times whole models, where a gap is spread over every layer and the
rest of the model; this shows what one call costs, the pipeline's Python included.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bench.hf_attention import add_model_arguments, batch, build, kernel_names, placed, without
from bench.measure import interleaved


@dataclass
class KeptCall:
    """The arguments of one call of the attention function (and the layer's kept input)."""

    module: torch.nn.Module
    args: tuple
    kwargs: dict[str, Any]
    layer_call: tuple | None  # what the layer's pre-hook kept (None: the layer has none)

    @property
    def keys(self) -> int:
        return self.args[1].size(2)


def kept_calls(model: torch.nn.Module, inputs: dict[str, torch.Tensor],
               new_tokens: int) -> dict[tuple[str, str], KeptCall]:  # fmt: skip
    """``(site, "step" or "sequence")`` → the call of a method layer kept there: the decoding
    step with the most keys, the first whole-sequence call."""
    from transformers import AttentionInterface

    from localnmt.hf import attention as hf_attention

    kept: dict[tuple[str, str], KeptCall] = {}

    def keep(module, query, key, value, mask, *args, **kwargs):
        site = getattr(getattr(module, "localnmt", None), "site", None)
        if site is not None:
            shape = "step" if query.size(2) == 1 else "sequence"
            call = KeptCall(module, (query, key, value, mask, *args), dict(kwargs),
                            module.__dict__.get("_localnmt_call"))  # fmt: skip
            old = kept.get((site.kind, shape))
            if old is None or (shape == "step" and call.keys > old.keys):
                kept[(site.kind, shape)] = call
        return hf_attention.localnmt_attention(module, query, key, value, mask, *args, **kwargs)

    AttentionInterface.register(hf_attention.NAME, keep)
    try:
        model.eval()
        with torch.no_grad():
            model(**inputs)
            model.generate(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
            )
    finally:
        hf_attention.register()
    return kept


def timed_pair(call: KeptCall, calls: int) -> dict[str, Callable[[], None]]:
    """``{"localnmt": …, "sdpa": …}``: ``calls`` calls of each function on ``call``'s arguments."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from localnmt.hf.attention import localnmt_attention

    heads = max(t.size(1) for t in call.args[:3])  # tied heads: fewer query and key groups
    plain = tuple(t.repeat_interleave(heads // t.size(1), dim=1) for t in call.args[:3])
    plain += tuple(call.args[3:])

    def ours() -> None:
        for _ in range(calls):
            if call.layer_call is not None:  # as the layer's pre-hook sets it (if it has one)
                call.module.__dict__["_localnmt_call"] = call.layer_call
            localnmt_attention(call.module, *call.args, **call.kwargs)

    def theirs() -> None:
        for _ in range(calls):
            sdpa_attention_forward(call.module, *plain, **call.kwargs)

    return {"localnmt": ours, "sdpa": theirs}


def main(argv: list[str] | None = None) -> None:
    import localnmt.hf

    parser = argparse.ArgumentParser(description=__doc__)
    add_model_arguments(parser)
    parser.add_argument("--calls", type=int, default=200, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--without", metavar="KERNEL", choices=kernel_names(), default=None,
                        help="also time localnmt's function with this kernel out of its "
                        "registry, or this path off (as bench.hf_attention --without): the "
                        "column 'without µs'")  # fmt: skip
    args = parser.parse_args(argv)
    inputs = batch(args)
    policy = os.environ.get("OMP_WAIT_POLICY") or "torch's default"
    print(f"cpu, float32, {args.dim}-dim, {args.layers}+{args.layers} layers, batch "
          f"{args.batch}, load {os.getloadavg()[0]:.2f}, torch threads "
          f"{torch.get_num_threads()} (OpenMP wait policy: {policy})")  # fmt: skip
    extra = f" {'without µs':>10s}" if args.without else ""
    print(f"{'family':20s} {'site':13s} {'call':9s} {'keys':>4s} {'localnmt µs':>11s} "
          f"{'sdpa µs':>8s} {'ratio':>6s}{extra}   (sdpa time / localnmt time)")  # fmt: skip
    device = torch.device("cpu")
    for family in args.families:
        model = localnmt.hf.apply(copy.deepcopy(build(args)), **placed(family, "all", args.layers))
        kept = kept_calls(model, inputs, args.new_tokens)
        for (site, shape), call in sorted(kept.items()):
            fns = timed_pair(call, args.calls)
            if args.without:
                fns["without"] = without(fns["localnmt"], args.without)
            with torch.no_grad():
                times = interleaved(fns, device, warmup=1, repeats=args.repeats)
            ours, theirs = (statistics.median(times[k]) / args.calls * 1e6
                            for k in ("localnmt", "sdpa"))  # fmt: skip
            column = ""
            if args.without:
                column = f" {statistics.median(times['without']) / args.calls * 1e6:10.1f}"
            print(f"{family:20s} {site:13s} {shape:9s} {call.keys:4d} {ours:11.1f} "
                  f"{theirs:8.1f} {theirs / ours:6.2f}{column}")  # fmt: skip
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
