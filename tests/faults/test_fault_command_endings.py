"""Every command ends through ``entry_point``: one ``PROG: error: MESSAGE`` line, exit 2."""

from __future__ import annotations

import pytest

from localnmt.attention.modifier import SpecError
from localnmt.errors import DataError


def test_fairseq_entry_without_a_command_is_a_usage_error(capsys):
    from localnmt.runs import fairseq_entry

    with pytest.raises(SystemExit) as exit_:
        fairseq_entry.main(["translate"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"fairseq_entry: error: {fairseq_entry.USAGE}\n"


def test_fairseq_entry_ends_a_checkpoint_error_as_its_command(monkeypatch, capsys):
    from localnmt.runs import fairseq_entry

    def damaged(command, rest):
        raise DataError(f"{rest[0]}: damaged checkpoint")

    monkeypatch.setattr(fairseq_entry, "run", damaged)
    with pytest.raises(SystemExit) as exit_:
        fairseq_entry.main(["generate-subsets", "ck.pt", "out"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "fairseq-generate: error: ck.pt: damaged checkpoint\n"


def test_a_spec_error_at_model_build_is_one_fairseq_line(capsys):
    from localnmt.fairseq_plugin.build_checks import check_at_build

    def check(args):
        raise SpecError(f"--encoder-attn-modifiers {args}: no layer 7")

    with pytest.raises(SystemExit) as exit_:
        check_at_build(check, "x")
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "fairseq: error: --encoder-attn-modifiers x: no layer 7\n"


def test_a_check_that_passes_returns(capsys):
    from localnmt.fairseq_plugin.build_checks import check_at_build

    check_at_build(lambda args: None, object())
    assert capsys.readouterr().err == ""


def test_multi_ref_with_missing_references_is_one_line(tmp_path, capsys):
    from localnmt.evaluation import multi_ref

    hyp = tmp_path / "hyp.txt"
    hyp.write_text("a b\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        multi_ref.main(["--refs-dir", str(tmp_path), "--hyp", f"mt03={hyp}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == f"multi_ref: error: no references mt03.ref0.. in {tmp_path}\n"


def test_multi_ref_with_a_missing_hypothesis_file_is_one_line(tmp_path, capsys):
    from localnmt.evaluation import multi_ref

    with pytest.raises(SystemExit) as exit_:
        multi_ref.main(["--refs-dir", str(tmp_path), "--hyp", f"mt03={tmp_path / 'no.txt'}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("multi_ref: error: ") and "no.txt" in err and len(err.splitlines()) == 1


def test_a_data_command_error_is_one_line_named_after_the_command(tmp_path, capsys):
    from localnmt.data import wmt14_en_de

    argv = ["process", "--raw-dir", str(tmp_path / "none"), "--workdir", str(tmp_path / "w")]
    with pytest.raises(SystemExit) as exit_:
        wmt14_en_de.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"python -m localnmt.data.wmt14_en_de: error: raw directory not found: {tmp_path}/none\n"
    )


def test_ctrl_c_in_a_data_command_says_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    from localnmt.data import prepare_gettext

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_gettext, "prepare_gettext_pair", interrupted)
    with pytest.raises(SystemExit) as exit_:
        prepare_gettext.main(["--pair", "en-de", "--workdir", str(tmp_path / "w")])
    assert exit_.value.code == 130
    assert capsys.readouterr().err == (
        "python -m localnmt.data.prepare_gettext: interrupted; finished steps are kept, "
        "a rerun resumes\n"
    )


def test_a_data_command_called_from_python_gives_sigterm_back(tmp_path, monkeypatch, capsys):
    import signal

    from localnmt.data import prepare_gettext

    monkeypatch.setattr(prepare_gettext, "prepare_gettext_pair", lambda *a, **k: tmp_path)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert prepare_gettext.main(["--pair", "en-de", "--workdir", str(tmp_path / "w")]) == 0
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert capsys.readouterr().out == f"{tmp_path}\n"


def test_the_ceiling_command_with_a_missing_reference_is_one_line(tmp_path, capsys):
    """It used to print argparse's usage block before the message."""
    from localnmt.evaluation import ceiling

    with pytest.raises(SystemExit) as exc:
        ceiling.main(["--ref", str(tmp_path / "nope.txt"), "--lang", "en"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"python -m localnmt.evaluation.ceiling: error: missing input file: "
                   f"{tmp_path / 'nope.txt'}"]  # fmt: skip


def _ends_through_entry_point(function, depth: int = 2) -> bool:
    """Wrapped by ``entry_point`` (``functools.wraps`` leaves ``__wrapped__``), calling it or
    ``run_data_command`` itself, or handing over to a function of its module that does."""
    import inspect
    import re

    if hasattr(function, "__wrapped__"):
        return True
    source = inspect.getsource(function)
    if "entry_point(" in source or "run_data_command(" in source:
        return True
    return depth > 0 and any(
        inspect.isfunction(called) and re.search(rf"\b{name}\(", source)
        and _ends_through_entry_point(called, depth - 1)
        for name, called in function.__globals__.items()
    )  # fmt: skip


def test_every_package_command_ends_through_entry_point():
    import importlib
    import inspect
    import pkgutil

    import localnmt

    mains = []
    for info in pkgutil.walk_packages(localnmt.__path__, "localnmt."):
        if "fairseq_plugin" in info.name or info.name.endswith("__main__"):
            continue
        main = getattr(importlib.import_module(info.name), "main", None)
        if inspect.isfunction(main) and main.__module__ == info.name:
            mains.append(main)
    assert len(mains) > 20
    assert [m.__module__ for m in mains if not _ends_through_entry_point(m)] == []
