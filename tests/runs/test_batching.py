"""Update-frequency formula and training recipes."""

import pytest

from localnmt.batching import update_freq
from localnmt.runs.recipes import get_recipe, train_args


@pytest.mark.parametrize(
    ("world", "tokens", "expected"),
    [
        (8, 4096, 1),
        (1, 4096, 8),
        (2, 4096, 4),
        (4, 4096, 2),
        (1, 3584, 10),
        (16, 4096, 1),
        (3, 4096, 3),
        (1, 8192, 4),
    ],
)
def test_update_freq_reaches_paper_batch(world: int, tokens: int, expected: int) -> None:
    freq = update_freq(world, tokens)
    assert freq == expected
    assert world * tokens * freq >= 8 * 4096
    assert freq == 1 or world * tokens * (freq - 1) < 8 * 4096


def test_update_freq_rejects_nonpositive() -> None:
    with pytest.raises(ValueError):
        update_freq(0, 4096)


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_base_and_big_recipes_follow_vaswani() -> None:
    base = train_args("base", world_size=1)
    big = train_args("big", world_size=8)
    assert _value(base, "--lr") == "0.0007" and _value(big, "--lr") == "0.0005"
    assert _value(base, "--dropout") == "0.1" and _value(big, "--dropout") == "0.3"
    for args in (base, big):
        assert _value(args, "--adam-betas") == "(0.9, 0.98)"
        assert _value(args, "--lr-scheduler") == "inverse_sqrt"
        assert _value(args, "--warmup-updates") == "4000"
        assert _value(args, "--label-smoothing") == "0.1"
    assert _value(base, "--update-freq") == "8" and _value(big, "--update-freq") == "1"
    assert _value(train_args("base", 2, max_tokens=2048), "--update-freq") == "8"
    assert get_recipe("base").average_last == 5 and get_recipe("big").average_last == 20


def test_tiny_recipe_shrinks_dims_and_layers() -> None:
    args = train_args("tiny", layers=1, max_update=20)
    assert _value(args, "--encoder-embed-dim") == "64"
    assert _value(args, "--decoder-layers") == "1"
    assert _value(args, "--max-update") == "20"
    assert _value(args, "--update-freq") == "1"
