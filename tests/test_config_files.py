"""localnmt.config_files: where configs/ is found, and the generic schema check."""

from __future__ import annotations

from pathlib import Path

import pytest

from localnmt import config_files
from localnmt.config_files import ConfigError, Key, check, config_dir

REPO = Path(__file__).resolve().parents[1]


def test_the_checkout_configs_folder_unless_overridden(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCALNMT_CONFIGS", raising=False)
    assert config_dir() == REPO / "configs"
    monkeypatch.setenv("LOCALNMT_CONFIGS", str(tmp_path))
    assert config_dir() == tmp_path
    monkeypatch.setenv("LOCALNMT_CONFIGS", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="LOCALNMT_CONFIGS=.*nope: not a directory"):
        config_dir()


def test_installed_package_data_comes_first(tmp_path, monkeypatch):
    """A non-editable install puts configs/ at localnmt/configs/ (setup.py package_dir)."""
    monkeypatch.delenv("LOCALNMT_CONFIGS", raising=False)
    package = tmp_path / "site-packages" / "localnmt"
    (package / "configs").mkdir(parents=True)
    monkeypatch.setattr(config_files, "__file__", str(package / "config_files.py"))
    assert config_dir() == package / "configs"
    (package / "configs").rmdir()
    with pytest.raises(ConfigError, match="no configs folder: looked for"):
        config_dir()


SCHEMA = {
    "name": Key(str, required=True),
    "rate": Key(float),
    "steps": Key(int),
    "flags": Key(list, items=str),
    "on": Key(bool),
    "kind": Key(str, choices=("a", "b")),
}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"rate": 1.0}, "f.yaml: x: missing key 'name'"),
        ({"name": "n", "rat": 1.0}, "f.yaml: x: unknown key 'rat' (valid keys: name, rate,"),
        ({"name": "n", "steps": 1.5}, "key 'steps' must be an integer, got float 1.5"),
        ({"name": "n", "steps": True}, "key 'steps' must be an integer, got bool True"),
        ({"name": "n", "rate": "1e-4"}, "key 'rate' must be a number, got str '1e-4'"),
        ({"name": "n", "rate": 1e999}, "key 'rate' must be a number, got float inf"),
        ({"name": "n", "on": 1}, "key 'on' must be true/false, got int 1"),
        ({"name": "n", "flags": ["--a", 3]},
         "key 'flags', item 1: must be a string, got int 3 (quote it)"),
        ({"name": "n", "kind": "c"}, "key 'kind': 'c' is not one of a, b"),
        (["name"], "f.yaml: x: expected a mapping, got list"),
    ],
)  # fmt: skip
def test_check_names_where_and_key(data, message):
    with pytest.raises(ConfigError) as err:
        check(data, SCHEMA, "f.yaml: x")
    assert message in str(err.value)


def test_check_passes_good_values_and_widens_ints_to_floats():
    out = check({"name": "n", "rate": 2, "steps": 3, "on": False}, SCHEMA, "f.yaml")
    assert out == {"name": "n", "rate": 2.0, "steps": 3, "on": False}
    assert isinstance(out["rate"], float)


def test_exponents_without_a_dot_are_numbers(tmp_path):
    """YAML 1.1 (PyYAML) reads ``7e-4`` as text; the loader reads an exponent without a dot
    as a number."""
    path = tmp_path / "c.yaml"
    path.write_text("a: 7e-4\nb: 7.0e-4\nc: -1E+3\nd: e5\ne: 12\n")
    assert config_files.read_yaml(path) == {"a": 7e-4, "b": 7e-4, "c": -1000.0, "d": "e5", "e": 12}
