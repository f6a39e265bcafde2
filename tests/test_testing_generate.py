"""The test helper ``localnmt.testing.generate`` decodes as the papers did (beam 4, length
penalty 0.6: ``DEFAULT_DECODING``), not with fairseq's length penalty 1.0."""

from __future__ import annotations

import pytest

from localnmt import testing
from localnmt.runs.run_specs import DEFAULT_DECODING


class _Parsed(Exception):
    """Raised with fairseq's parsed arguments, before anything is loaded."""


@pytest.fixture
def parsed(monkeypatch):
    """Call ``testing.generate`` and return fairseq-generate's parsed arguments."""
    from fairseq import options

    real = options.parse_args_and_arch

    def stop(parser, argv):
        raise _Parsed(real(parser, argv))

    monkeypatch.setattr(options, "parse_args_and_arch", stop)

    def run(tmp_path, **kwargs):
        with pytest.raises(_Parsed) as caught:
            testing.generate(tmp_path, tmp_path / "checkpoint.pt", **kwargs)
        return caught.value.args[0]

    return run


def test_generate_decodes_with_the_papers_settings(parsed, tmp_path):
    args = parsed(tmp_path)
    assert (args.beam, args.lenpen) == (DEFAULT_DECODING.beam, DEFAULT_DECODING.lenpen)
    assert (args.beam, args.lenpen) == (4, 0.6)


def test_generate_takes_other_settings_when_asked(parsed, tmp_path):
    args = parsed(tmp_path, beam=2, lenpen=1.0)
    assert (args.beam, args.lenpen) == (2, 1.0)
