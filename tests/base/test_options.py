"""localnmt.runs.options: options declared once on a spec's fields."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from localnmt.errors import UsageError
from localnmt.runs.options import (
    add_options,
    check_bounds,
    flag_of,
    from_options,
    option,
    split_extra,
    to_argv,
)


@dataclass
class Spec:
    max_update: int = option(100, minimum=1, help="updates")
    lr: float = option(5e-4, help="learning rate")
    name: str | None = option(None, flag="--run-name", help="name")
    quiet: bool = option(False, help="less output")
    precision: str = option("fp32", consts=(("--fp16", "fp16"), ("--bf16", "bf16")),
                            help="precision")  # fmt: skip

    def __post_init__(self) -> None:
        check_bounds(self)


def parse(argv: list[str]) -> Spec:
    parser = argparse.ArgumentParser()
    add_options(parser, Spec)
    return from_options(Spec, parser.parse_args(argv))


def test_parse_and_write_back_round_trip():
    argv = ["--max-update", "7", "--run-name", "x", "--quiet", "--bf16"]
    spec = parse(argv)
    assert spec == Spec(max_update=7, name="x", quiet=True, precision="bf16")
    assert to_argv(spec) == argv
    assert parse([]) == Spec() and to_argv(Spec()) == []
    assert to_argv(Spec(), always=["lr"]) == ["--lr", "0.0005"]


def test_flags_and_exclusive_switches():
    assert flag_of(Spec, "max_update") == "--max-update" and flag_of(Spec, "name") == "--run-name"
    with pytest.raises(SystemExit):
        parse(["--fp16", "--bf16"])


def test_bounds_stop_with_one_line_naming_the_flag():
    with pytest.raises(UsageError, match=r"^--max-update must be at least 1, got 0$"):
        Spec(max_update=0)
    with pytest.raises(UsageError, match=r"^--lr must be a finite number, got nan$"):
        Spec(lr=float("nan"))


def test_split_extra_at_the_first_double_dash():
    assert split_extra(["--a", "--", "--b", "--", "c"]) == (["--a"], ["--b", "--", "c"])
    assert split_extra(["--a"]) == (["--a"], [])
