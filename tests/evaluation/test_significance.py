"""Paired bootstrap resampling."""

import random

import pytest

from localnmt.evaluation.significance import paired_bootstrap, significance_marker


def _corpus(n: int = 60) -> tuple[list[str], list[str], list[str]]:
    rng = random.Random(0)
    words = "der die das hund katze maus haus baum ist war sehr nicht gross klein".split()
    refs = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(n)]
    good = list(refs)
    bad = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(n)]
    return refs, good, bad


def test_identical_systems_are_not_significant() -> None:
    refs, _, bad = _corpus()
    result = paired_bootstrap(bad, bad, refs, samples=200)
    assert result.delta == 0 and result.p_value == 1.0 and result.marker == ""


def test_much_better_system_is_significant_at_001() -> None:
    refs, good, bad = _corpus()
    result = paired_bootstrap(bad, good, refs, samples=1000, seed=1)
    assert result.system == pytest.approx(100.0)
    assert result.p_value < 0.01 and result.marker == "⇑"
    reverse = paired_bootstrap(good, bad, refs, samples=200, seed=1)
    assert reverse.delta < 0 and reverse.marker == "⇓"


def test_bootstrap_is_deterministic_per_seed() -> None:
    refs, good, bad = _corpus()
    mixed = [g if i % 3 else b for i, (g, b) in enumerate(zip(good, bad))]
    mixed2 = [g if i % 4 else b for i, (g, b) in enumerate(zip(good, bad))]
    a = paired_bootstrap(mixed, mixed2, refs, samples=300, seed=7)
    b = paired_bootstrap(mixed, mixed2, refs, samples=300, seed=7)
    assert a == b


def test_markers() -> None:
    assert significance_marker(0.001, 1.0) == "⇑"
    assert significance_marker(0.03, 1.0) == "↑"
    assert significance_marker(0.2, 1.0) == ""
    assert significance_marker(0.03, -1.0) == "↓"


def test_bootstrap_intervals_are_sacrebleus() -> None:
    import pytest
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    from localnmt.evaluation.significance import bootstrap_intervals

    refs = [f"the cat {i} sat on the mat near door {i % 7}" for i in range(60)]
    weak = [f"a cat {i} sat on a mat" if i % 3 else f"the cat {i} sat" for i in range(60)]
    good = [r if i % 4 else r.replace("mat", "rug") for i, r in enumerate(refs)]
    out = bootstrap_intervals([("weak", weak), ("good", good), ("same", weak)], refs, samples=200)
    _, direct = PairedTest([("weak", weak), ("good", good)], {"BLEU": BLEU()}, [refs],
                           test_type="bs", n_samples=200)()  # fmt: skip
    for mine, theirs in zip(out, direct["BLEU"]):
        assert mine.score == pytest.approx(theirs.score)
        assert mine.ci == pytest.approx((theirs.mean - theirs.ci, theirs.mean + theirs.ci))
    assert out[0].p_value is None and out[1].p_value == pytest.approx(direct["BLEU"][1].p_value)
    assert out[1].p_value < 0.05 and out[2].p_value == 1.0  # equal scores: p = 1, not 1/201
    bad = bootstrap_intervals([("x", ["zzz"] * 59 + [refs[0]]), ("y", ["q"] * 60)], refs,
                              samples=200)  # fmt: skip
    assert bad[0].ci[0] == 0.0 <= bad[0].ci[1] and bad[1].ci == (0.0, 0.0)  # cut at 0
    with pytest.raises(ValueError, match="59 hypotheses but 60 references"):
        bootstrap_intervals([("x", weak[:59])], refs)
