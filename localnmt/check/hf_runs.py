"""The transformers adapter's part of the self-test (``localnmt.hf``): a tiny MarianMT model
built from a config (no download) with a method at every site, where transformers is
installed in the supported range: that it imports (a broken install of one of its optional
dependencies stops ``from transformers import MarianMTModel``), that cached greedy generation
equals generation without the cache, that a few updates lower the loss, and that
``save_pretrained`` then :func:`localnmt.hf.from_pretrained` gives the same logits."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from localnmt.check.check_results import FAIL, PASS, SKIP, CheckResult
from localnmt.check.environment import format_transformers, transformers_status
from localnmt.check.selftest import LOSS_FALL

SECTION = "transformers"
#: a method at every site, with learned parameters and decoding state
SPECS = {"encoder_self": "localness[window=query] + rel_pos[clip=3]",
         "decoder_self": "csan_1d[window=3]", "cross": "gmm[k=2]"}  # fmt: skip
PAD, EOS, START, VOCAB = 0, 1, 0, 40


def _result(name: str, check: Callable[[], tuple[bool, str]]) -> CheckResult:
    start = time.perf_counter()
    try:
        ok, detail = check()
        status = PASS if ok else FAIL
    except Exception as err:  # a check that crashes has failed: say how, and go on
        status, detail = FAIL, f"{type(err).__name__}: {err}"[:300]
    return CheckResult(SECTION, name, status, detail, round(time.perf_counter() - start, 3))


def _tiny_marian(device: torch.device) -> Any:
    from transformers import MarianConfig, MarianMTModel

    import localnmt.hf

    config = MarianConfig(
        vocab_size=VOCAB, d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
        decoder_start_token_id=START, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    return localnmt.hf.apply(MarianMTModel(config), **SPECS).to(device).eval()


def _batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three right-padded sources and their reversals as targets."""
    generator = torch.Generator().manual_seed(0)
    lengths = [7, 5, 3]
    ids = torch.full((3, 7), PAD)
    targets = torch.full((3, 8), -100)
    for row, n in enumerate(lengths):
        words = torch.randint(3, VOCAB, (n,), generator=generator)
        ids[row, : n - 1], ids[row, n - 1] = words[:-1], EOS
        targets[row, : n - 1], targets[row, n - 1] = words[:-1].flip(0), EOS
    return ids.to(device), ids.ne(PAD).long().to(device), targets.to(device)


def transformers_checks(device: torch.device, updates: int) -> list[CheckResult]:
    """The section's results; one SKIP where transformers is missing or out of range."""
    status = transformers_status()
    if not status["supported"]:
        return [CheckResult(SECTION, "localnmt.hf", SKIP, format_transformers(status), 0.0)]

    def imports() -> tuple[bool, str]:
        from transformers import MarianMTModel  # noqa: F401

        return True, f"transformers {status['version']}: MarianMTModel imports"

    results = [_result("import", imports)]
    if results[0].status != PASS:
        return results
    ids, mask, labels = _batch(device)

    def generation() -> tuple[bool, str]:
        model = _tiny_marian(device)
        kept, fresh = (model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6,
                                      num_beams=1, do_sample=False, use_cache=cache)
                       for cache in (True, False))  # fmt: skip
        same = torch.equal(kept, fresh)
        return same, f"greedy, 6 tokens: with the cache {'=' if same else '!='} without"

    def training() -> tuple[bool, str]:
        model = _tiny_marian(device).train()
        optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(updates):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(float(loss))
        finite = all(math.isfinite(x) for x in losses)
        ok = finite and losses[-1] <= LOSS_FALL * losses[0]
        return ok, f"loss {losses[0]:.3f} -> {losses[-1]:.3f}" + ("" if finite else ", NOT FINITE")

    def saved_and_loaded() -> tuple[bool, str]:
        import localnmt.hf

        model = _tiny_marian(device)
        inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=ids)
        with tempfile.TemporaryDirectory() as folder, torch.no_grad():
            model.save_pretrained(folder)
            loaded = localnmt.hf.from_pretrained(type(model), folder).to(device)
            error = float((loaded(**inputs).logits - model(**inputs).logits).abs().max())
        return error == 0.0, f"logits after from_pretrained: max |difference| {error:.1e}"

    results.append(_result("marian: generate with the cache", generation))
    results.append(_result(f"marian: training x{updates}", training))
    results.append(_result("marian: save_pretrained, from_pretrained", saved_and_loaded))
    return results
