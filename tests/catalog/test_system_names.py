"""Reports name a system by what it is (its methods), then by its paper and row."""

from __future__ import annotations

import pytest

from localnmt.attention.modifier import modifier_names
from localnmt.catalog import all_rows, get_row
from localnmt.catalog.names import METHOD_NAMES, system_name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("zhang2021/table-2/nist-zh-en/our-method/base",
         "GMM cross-attention (Zhang & Feng 2021, Table 2: Our Method)"),
        ("vaswani2017/table-3/transformer-base/base",
         "Transformer baseline (Vaswani et al. 2017, Table 3: Transformer (base))"),
        ("yang2019/table-1/cnns/base", "CNN layers (Yang et al. 2019, Table 1: + CNNs)"),
        ("yang2018/table-4/wmt17-zh-en/rel-pos/base",
         "relative positions (Yang et al. 2018, Table 4: + Rel_Pos)"),
    ],
)  # fmt: skip
def test_system_names_say_what_the_system_is(name: str, expected: str) -> None:
    assert system_name(get_row(name)) == expected


def test_every_method_has_a_prose_name_and_every_row_a_system_name() -> None:
    package_methods = {n for n in modifier_names() if not n.startswith("_")}  # tests add probes
    assert package_methods <= set(METHOD_NAMES)
    for row in all_rows():
        assert row.row in system_name(row)
