"""One CPU thread for small attention maps: the thread count inside and after the block, and
the numbers it must not change."""

from __future__ import annotations

import pytest
import torch

from localnmt.attention import AttentionSite, LocalAttention, threads
from localnmt.attention.spec import build_modifiers, parse_spec

CPU = torch.device("cpu")
needs_openmp = pytest.mark.skipif(
    not threads.OPENMP, reason="torch's CPU parallel backend is not OpenMP: switch is off"
)


@pytest.fixture(autouse=True)
def rule_on(monkeypatch):
    """The rule on, as under sleeping threads (the suite sets ``OMP_WAIT_POLICY=PASSIVE``)."""
    monkeypatch.setattr(threads, "ENABLED", threads.OPENMP)


@pytest.mark.parametrize(
    "env,sleeps",
    [
        ({}, False),  # torch's own policy: threads spin a while
        ({"OMP_WAIT_POLICY": "PASSIVE"}, True),
        ({"OMP_WAIT_POLICY": " passive "}, True),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, False),
        ({"GOMP_SPINCOUNT": "0"}, True),
        ({"GOMP_SPINCOUNT": "10000"}, False),
    ],
)
def test_the_rule_follows_the_openmp_wait_policy(env, sleeps):
    assert threads.threads_sleep(env) is sleeps


@pytest.fixture()
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@needs_openmp
def test_small_map_runs_on_one_thread_and_restores(two_threads):
    with threads.one_thread_if_small(threads.SMALL_MAP, CPU):
        assert torch.get_num_threads() == 1
        with threads.one_thread_if_small(10, CPU):  # nested: still one, not restored early
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


@needs_openmp
def test_large_map_and_switch_keep_every_thread(two_threads, monkeypatch):
    with threads.one_thread_if_small(threads.SMALL_MAP + 1, CPU):
        assert torch.get_num_threads() == 2
    monkeypatch.setattr(threads, "ENABLED", False)
    with threads.one_thread_if_small(1, CPU):
        assert torch.get_num_threads() == 2


@needs_openmp
def test_restored_after_an_error(two_threads):
    with pytest.raises(ValueError), threads.one_thread_if_small(1, CPU):
        raise ValueError("inside")
    assert torch.get_num_threads() == 2


def _gmm_cross_attention() -> LocalAttention:
    torch.manual_seed(0)
    site = AttentionSite("cross", 0, 1, 32, 4)
    mods = build_modifiers(parse_spec("gmm"), site)
    return LocalAttention(32, 4, site=site, modifiers=mods, encoder_decoder_attention=True).eval()


@needs_openmp
def test_decoding_step_post_runs_on_one_thread_same_numbers(two_threads, monkeypatch):
    """A decoding step's map (B·H·1·Tk) is small: the GMM post stage sees one thread; a long
    source keeps both. The output is the same with the switch off."""
    attn = _gmm_cross_attention()
    seen: list[int] = []
    post = type(attn.modifiers[0]).post
    monkeypatch.setattr(
        type(attn.modifiers[0]), "post",
        lambda self, ctx, p: (seen.append(torch.get_num_threads()), post(self, ctx, p))[1],
    )  # fmt: skip
    x, short = torch.randn(1, 3, 32), torch.randn(7, 3, 32)
    long = torch.randn(threads.SMALL_MAP // 12 + 1, 3, 32)  # B·H·1·Tk > SMALL_MAP
    outs = []
    for src, enabled in ((short, True), (short, False), (long, True)):
        monkeypatch.setattr(threads, "ENABLED", enabled)
        with torch.no_grad():
            outs.append(attn(x, src, src, incremental_state={}, static_kv=True)[0])
    assert seen == [1, 2, 2]
    torch.testing.assert_close(outs[0], outs[1], atol=1e-6, rtol=0)
    assert torch.get_num_threads() == 2


@needs_openmp
def test_concurrent_threads_each_restore_their_own_count(two_threads) -> None:
    """Thread A enters, B enters, A leaves, B leaves: each is back at 2 when it leaves."""
    import threading

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    after: dict[str, int] = {}

    def worker(name: str, entered: threading.Event, wait_for: threading.Event,
               leave_first: threading.Event | None) -> None:  # fmt: skip
        torch.set_num_threads(2)
        with threads.one_thread_if_small(1, CPU):
            entered.set()
            wait_for.wait(5)
            if leave_first is not None:
                leave_first.wait(5)
        if name == "a":
            a_out.set()
        after[name] = torch.get_num_threads()

    a = threading.Thread(target=worker, args=("a", a_in, b_in, None))
    b = threading.Thread(target=worker, args=("b", b_in, a_in, a_out))
    a.start(), b.start()
    a.join(10), b.join(10)
    assert after == {"a": 2, "b": 2}
