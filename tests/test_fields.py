"""localnmt.fields: one field declaration read by command lines, YAML schemas and the attention
methods' spec options."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from localnmt import fields
from localnmt.attention.modifier import SpecError, build_options, get_modifier
from localnmt.config_files import ConfigError, Key, check, keys_of
from localnmt.runs import options


@dataclass(frozen=True)
class Example:
    name: str = fields.field(help="a name", flag="--run-name")
    rate: float = fields.field(0.5, help="a rate", minimum=0.0)
    steps: int | None = fields.field(None, help="steps")
    kind: str = fields.field("a", help="a kind", choices=("a", "b"))
    tags: tuple[str, ...] = fields.field((), help="tags")
    on: bool = fields.field(False, help="a switch")


def test_one_declaration_gives_the_command_line():
    parser = argparse.ArgumentParser()
    options.add_options(parser, Example, exclude=("tags",))
    ns = parser.parse_args(["--run-name", "x", "--steps", "3", "--kind", "b", "--on"])
    spec = options.from_options(Example, ns)
    assert spec == Example(name="x", steps=3, kind="b", on=True)
    assert options.to_argv(spec) == ["--run-name", "x", "--steps", "3", "--kind", "b", "--on"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--run-name", "x", "--kind", "c"])
    with pytest.raises(options.UsageError, match="--rate must be at least 0, got -1"):
        options.check_bounds(Example(name="x", rate=-1.0))


def test_the_same_declaration_gives_the_yaml_schema():
    schema = keys_of(Example)
    assert schema["name"] == Key(str, required=True)
    assert schema["steps"] == Key((int, type(None)))
    assert schema["kind"] == Key(str, choices=("a", "b"))
    assert schema["tags"] == Key(list, items=str)
    assert check({"name": "n", "rate": 1, "tags": ["t"]}, schema, "f.yaml")["rate"] == 1.0
    with pytest.raises(ConfigError, match="key 'kind': 'c' is not one of a, b"):
        check({"name": "n", "kind": "c"}, schema, "f.yaml")
    with pytest.raises(ConfigError, match="key 'tags', item 0: must be a string"):
        check({"name": "n", "tags": [1]}, schema, "f.yaml")


@pytest.mark.parametrize(
    "text, kinds, value",
    [("3", (int,), 3), ("none", (int, type(None)), None), ("2.5", (float, type(None)), 2.5),
     ("off", (bool,), False), ("Yes", (bool,), True), ("x", (str,), "x")],
)  # fmt: skip
def test_text_is_parsed_by_the_annotated_type(text, kinds, value):
    assert fields.parse_text(text, kinds) == value


def test_method_options_are_parsed_by_their_annotations_not_type_names():
    localness = get_modifier("localness")
    options_ = build_options(localness, {"bias": "false", "fixed_size": "4", "window": "head"})
    assert options_.bias is False and options_.fixed_size == 4.0 and options_.window == "head"
    assert fields.types_of(localness.Options, "fixed_size") == (float,)
    with pytest.raises(SpecError, match="option 'k' of method 'gmm' expects int, got 'x'"):
        build_options(get_modifier("gmm"), {"k": "x"})
    with pytest.raises(SpecError, match="must be one of fixed, layer, query, head, got 'wide'"):
        build_options(localness, {"window": "wide"})
