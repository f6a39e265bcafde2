"""Which kernel runs, and why the others decline: the registries, forcing and the trace."""

from __future__ import annotations

import logging

import pytest
import torch
from helpers.attention import make_attention, mixed_padding

from localnmt.attention import dispatch
from localnmt.attention.fast.native import c_band as native_band
from localnmt.attention.fast.native import c_relative as native_relative
from localnmt.attention.problem import REGISTRY, dense_attention, kernel_names, register_kernel

SPECS = [  # (site, spec): every family, with windows, biases, post stages and value terms
    ("encoder_self", ""),
    ("encoder_self", "csan_1d[window=5]"),
    ("encoder_self", "csan_2d[window=3]"),
    ("encoder_self", "localness"),
    ("encoder_self", "rel_pos"),
    ("encoder_self", "block[block=4]"),
    ("encoder_self", "bi_direct"),
    ("encoder_self", "neighbor"),
    ("encoder_self", "local_hard"),
    ("encoder_self", "local_heads_renorm[masks=prev1;next1;band2;global]"),
    ("decoder_self", "csan_1d[window=5]"),
    ("cross", "gmm"),
    ("cross", "gmm[variant=norm]"),
    ("cross", "hardcoded_gaussian"),
]


def run_traced(site: str, spec: str, length: int, dtype=torch.float32, train: bool = True):
    att = make_attention(site, spec, embed_dim=16, heads=4, train=train).to(dtype)
    x = torch.randn(length, 4, 16, dtype=dtype, requires_grad=True)
    mem = torch.randn(length + 3, 4, 16, dtype=dtype)
    causal = site == "decoder_self"
    mask = None if causal else mixed_padding(4, length + 3 * (site == "cross"), 2, "left")
    future = torch.triu(torch.full((length, length), float("-inf")), 1) if causal else None
    keys = mem if site == "cross" else x
    with dispatch.trace(explain=True) as seen:
        out, _ = att(x, keys, keys, key_padding_mask=mask, attn_mask=future, need_weights=False)
    return seen, out


@pytest.mark.parametrize("site,spec", SPECS)
@pytest.mark.parametrize("length", [9, 300])
def test_every_call_names_its_kernel_and_every_decline_a_reason(site, spec, length):
    seen, out = run_traced(site, spec, length)
    assert torch.isfinite(out).all()
    assert seen.calls, "nothing traced"
    for call in seen.calls:
        registry = next(r for r in dispatch.registries() if r.op == call.op)
        assert call.kernel in registry.names(reference=True)
        if call.kernel == registry.reference_name and not call.declined:
            assert call.detail and call.detail[0]  # the caller said why it took the reference
            continue
        assert call.kernel not in call.declined
        assert all(  # every kernel: reasons, each a non-empty line
            why and all(isinstance(r, str) and r for r in why) for why in call.declined.values()
        )
        # explain=True: every other kernel was asked (those below: whether it would accept)
        assert set(call.declined) == set(registry.names()) - {call.kernel}


def test_the_trace_reports_the_expected_kernels():
    assert run_traced("encoder_self", "", 9)[0].kernels() == ["sdpa"]
    assert run_traced("encoder_self", "localness", 9)[0].kernels() == ["gaussian_fold"]
    band = run_traced("encoder_self", "csan_1d[window=5]", 300)[0]
    assert band.kernels() == ["band"]
    assert band.calls[0].detail == (
        ["C"] if native_band.ENABLED else ["blocked, chunked fused CPU op"]
    )
    rel = run_traced("encoder_self", "rel_pos", 9)[0].calls
    if native_relative.ENABLED:
        assert [c.kernel for c in rel] == ["relative"] and rel[0].detail == ["C"]
    else:
        assert [c.kernel for c in rel] == ["dense"]
        assert rel[0].declined["relative"] == ["the C extension localnmt._relative is not built"]
    for kernel in ("shared_source", "band", "gaussian_fold", "sdpa"):  # the value term: C only
        assert rel[0].declined[kernel][0].startswith("relative value term")
    gmm = run_traced("cross", "gmm", 9)[0]  # the dense path forms α and γ (gmm.AFFINE_ON_CPU off)
    assert gmm.kernels("attention") == ["dense"] and len(gmm.kernels("gmm mixture")) == 1


def test_weights_take_the_dense_reference_and_say_why():
    att = make_attention("encoder_self", "csan_1d[window=3]", embed_dim=16, heads=4)
    x = torch.randn(7, 2, 16)
    with dispatch.trace() as seen:
        att(x, x, x, need_weights=True)
    (call,) = seen.calls
    assert (call.kernel, call.detail) == ("dense", ["weights requested"])
    assert "encoder_self layer 1, B=2 H=4 Tq=7 Tk=7, float32 on cpu" in str(call)


def test_explain_asks_every_kernel_without_running_one(monkeypatch):
    seen, _ = run_traced("encoder_self", "", 9)
    (call,) = seen.calls
    assert call.kernel == "sdpa"
    assert call.declined["band"] == ["no window (band) restricts the keys"]
    assert call.declined["gaussian_fold"] == ["no Gaussian (quadratic) bias to fold"]
    assert call.declined["shared_source"] == ["one key row per query row (no shared source)"]


def test_forcing_an_unknown_kernel_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown kernel 'nope' .*band.*dense.*gmm_c_step"):
        with dispatch.forced_kernel("nope"):
            pass


def test_forcing_the_reference_runs_it():
    att = make_attention("encoder_self", "csan_1d[window=5]", embed_dim=16, heads=4)
    x = torch.randn(300, 2, 16)
    with dispatch.forced_kernel("dense"), dispatch.trace() as seen:
        forced, _ = att(x, x, x, need_weights=False)
    assert seen.kernels() == ["dense"] and seen.calls[0].forced == "dense"
    auto, _ = att(x, x, x, need_weights=False)
    torch.testing.assert_close(forced, auto, atol=1e-5, rtol=1e-5)


def test_a_new_kernel_is_tried_in_its_place_and_its_declines_are_reported():
    calls = []
    order = REGISTRY.names()

    def check(problem):
        return "odd length" if problem.q.size(2) % 2 else None

    @register_kernel("test_probe", check=check)
    def probe(problem):
        calls.append(problem.q.size(2))
        if problem.q.size(2) == 4:
            return dispatch.Declined("four is too few")
        if problem.q.size(2) == 6:
            return None  # a kernel written before decline reasons
        return dense_attention(problem)[0]

    try:
        REGISTRY.arrange(("test_probe", *order))
        att = make_attention("encoder_self", "", embed_dim=16, heads=4)
        traces = {}
        for t in (3, 4, 6, 8):
            x = torch.randn(t, 2, 16)
            with dispatch.trace() as traces[t]:
                att(x, x, x, need_weights=False)
        assert calls == [4, 6, 8]  # the check kept length 3 from running it
        assert traces[3].calls[0].declined["test_probe"] == ["odd length"]
        assert traces[4].calls[0].declined["test_probe"] == ["four is too few"]
        assert traces[6].calls[0].declined["test_probe"] == ["declined"]
        assert [t.kernels() for t in traces.values()] == [["sdpa"]] * 3 + [["test_probe"]]
    finally:
        REGISTRY.unregister("test_probe")
    assert kernel_names() == order


def test_a_kernel_that_requires_a_feature_is_not_checked_without_it():
    """``requires`` is asked first; where it declines, the dispatch asks nothing else of the
    kernel, and a trace with ``explain`` lists its reason before the check's."""
    checked = []
    order = REGISTRY.names()

    def check(problem):
        checked.append(problem.q.size(2))
        yield "the check's own reason"

    def requires(problem):
        return None if problem.q.size(2) > 3 else "three queries or fewer"

    register_kernel("test_requires", check=check, requires=requires)(lambda p: None)
    try:
        REGISTRY.arrange(("test_requires", *order))
        att = make_attention("encoder_self", "", embed_dim=16, heads=4)
        for t in (3, 5):
            x = torch.randn(t, 2, 16)
            att(x, x, x, need_weights=False)
        assert checked == [5]  # length 3: requires declined, the check was not asked
        x = torch.randn(3, 2, 16)
        with dispatch.trace(explain=True) as seen:
            att(x, x, x, need_weights=False)
        assert seen.calls[0].declined["test_requires"] == [
            "three queries or fewer",
            "the check's own reason",
        ]
        assert seen.kernels() == ["sdpa"]
    finally:
        REGISTRY.unregister("test_requires")
    assert kernel_names() == order


def test_debug_log_names_the_kernel(caplog):
    att = make_attention("encoder_self", "localness", embed_dim=16, heads=4)
    x = torch.randn(5, 2, 16)
    with caplog.at_level(logging.DEBUG, logger="localnmt.attention.dispatch"):
        att(x, x, x, need_weights=False)
    assert any(": gaussian_fold" in r.getMessage() for r in caplog.records)


def test_nothing_is_recorded_outside_a_trace():
    att = make_attention("encoder_self", "", embed_dim=16, heads=4)
    x = torch.randn(5, 2, 16)
    with dispatch.trace() as outer:
        with dispatch.trace() as inner:
            att(x, x, x, need_weights=False)
        att(x, x, x, need_weights=False)
    assert len(inner.calls) == 1 and len(outer.calls) == 1  # the innermost block records


def test_the_order_is_one_table_naming_each_kernel_once():
    from localnmt.attention import fast, mixture

    assert kernel_names() == list(fast.ATTENTION_ORDER)
    assert mixture.REGISTRY.names() == list(fast.MIXTURE_ORDER)
    order = REGISTRY.names()
    with pytest.raises(ValueError, match="does not name each registered kernel once"):
        REGISTRY.arrange(order[:-1])
    with pytest.raises(ValueError, match="does not name each registered kernel once"):
        REGISTRY.arrange([*order, "sdpa"])
    assert REGISTRY.names() == order  # a refused order changes nothing


def test_dispatch_imports_no_kernel():
    """The registries are filled where the package is assembled (``fast/__init__.py``), not
    by an import inside the dispatch (which made a circle through every kernel module)."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(dispatch.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert not {m for m in imported if m and m.startswith("localnmt.attention")}, imported


def test_a_forced_kernel_that_declines_gives_every_reason():
    att = make_attention("encoder_self", "localness", embed_dim=16, heads=4).to(torch.bfloat16)
    x = torch.randn(5, 2, 16, dtype=torch.bfloat16)
    with dispatch.forced_kernel("band"), pytest.raises(dispatch.KernelDeclined) as err:
        att(x, x, x, need_weights=False)
    assert err.value.reasons == ["no window (band) restricts the keys", "a bias"]
    assert "no window (band) restricts the keys; a bias" in str(err.value)


def test_kernel_removed_takes_one_kernel_out_and_puts_it_back_in_its_place():
    from localnmt.attention import mixture

    order = mixture.REGISTRY.names()
    with dispatch.kernel_removed("gmm_c_raw"):
        assert mixture.REGISTRY.names() == [n for n in order if n != "gmm_c_raw"]
    assert mixture.REGISTRY.names() == order
    with pytest.raises(RuntimeError), dispatch.kernel_removed("gmm_c_raw"):
        raise RuntimeError("the block fails")
    assert mixture.REGISTRY.names() == order
    with pytest.raises(ValueError, match="unknown kernel 'nope'"), dispatch.kernel_removed("nope"):
        pass


def _toy_registry() -> tuple[dispatch.KernelRegistry, list[str]]:
    """A registry of integer problems (tensors of that many elements): kernel ``odd`` takes odd
    sizes and has no prepared form, ``any`` takes every size, prepared or not."""
    ran: list[str] = []
    toy: dispatch.KernelRegistry = dispatch.KernelRegistry(
        "toy", reference_name="toy_reference", reference=lambda p: torch.zeros(p),
        describe=str,
    )  # fmt: skip
    dispatch._REGISTRIES.remove(toy)  # not one of the package's registries

    def prepare(problem: int):
        def call(q, k, v):
            ran.append(f"prepared {problem}")
            return q + k + v

        return call

    toy.register("odd", check=lambda p: None if p % 2 else "even")(
        lambda p: ran.append("odd") or torch.ones(p)
    )
    toy.register("any", prepare=prepare)(lambda p: ran.append("any") or torch.ones(p))
    return toy, ran


def test_a_prepared_kernel_is_the_one_the_dispatch_would_choose():
    toy, ran = _toy_registry()
    one = torch.ones(2)
    assert toy.prepared(3) is None  # its kernel, ``odd``, has no prepared form
    prepared = toy.prepared(2)
    assert prepared is not None and prepared.kernel == "any"
    torch.testing.assert_close(prepared(one, one, one), torch.full((2,), 3.0))
    assert ran == ["prepared 2"]  # the checks were asked once, the kernel's run never
    toy.unregister("any")
    assert toy.prepared(2) is None  # nothing takes it: the reference path has no prepared form


@pytest.mark.parametrize("then", ["traced", "forced", "logged", "registry changed", "off"])
def test_a_prepared_kernel_stands_aside_where_calls_must_be_seen(then, caplog, monkeypatch):
    """Traced, logged or forced dispatches see every call, and a registry changed since may
    choose another kernel: the prepared call answers None, and its caller dispatches."""
    toy, ran = _toy_registry()
    one = torch.ones(2)
    prepared = toy.prepared(2)
    assert prepared is not None
    with dispatch.trace():
        assert toy.prepared(2) is None
    with dispatch.forced_kernel("sdpa"):
        assert toy.prepared(2) is None
    with caplog.at_level(logging.DEBUG, logger="localnmt.attention.dispatch"):
        assert toy.prepared(2) is None
    if then == "registry changed":
        toy.arrange(["any", "odd"])
        assert prepared(one, one, one) is None
        assert toy.prepared(2) is not None  # prepared again, for the new order
    elif then == "off":
        monkeypatch.setattr(dispatch, "PREPARED", False)
        assert prepared(one, one, one) is None and toy.prepared(2) is None
        monkeypatch.setattr(dispatch, "PREPARED", True)
        assert prepared(one, one, one) is not None
    else:
        ctx = {
            "traced": dispatch.trace(),
            "forced": dispatch.forced_kernel("sdpa"),
            "logged": caplog.at_level(logging.DEBUG, logger="localnmt.attention.dispatch"),
        }[then]
        with ctx:
            assert prepared(one, one, one) is None
        assert prepared(one, one, one) is not None
    assert ran.count("prepared 2") == (then != "registry changed")  # none ran while aside
