"""fairseq's start-up noise is gone from the project's commands; its real lines are not."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import warnings

import pytest

from localnmt import quiet

#: What the noise looks like in a command's output (each line starts one of them).
NOISE = [
    "Please install tensorboardX",
    "is no longer experimental",
    "The version_base parameter is not specified",
    "Usage of deprecated keyword in package header",
    "is validated against ConfigStore schema",
    "The strict flag in the compose API is deprecated",
    "torch.cuda.amp.autocast(args...)` is deprecated",
    "`torch.jit.script` is deprecated",  # FutureWarning on fairseq's import from torch 2.15
]


def _fairseq_config_warnings() -> list[str]:
    """The warnings fairseq-train's argument handling raises (hydra compose), as messages."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["DATA", "--arch", "transformer", "--cpu"])
    with warnings.catch_warnings(record=True) as caught:
        convert_namespace_to_omegaconf(args)
    # a ResourceWarning is the garbage collector's, from whatever ran before, not fairseq's
    return [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)]


def test_hydra_filters_match_what_fairseq_raises_and_drop_only_that() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # in front of the package's filters: the raw warnings
        raw = _fairseq_config_warnings()
        hydra = [m for m in raw if any(re.match(p, m, re.I) for p in quiet.HYDRA_DEPRECATIONS)]
        assert len(hydra) >= 4, raw  # the page a training log opened with
        quiet.install()  # in front of "always" now
        assert _fairseq_config_warnings() == [m for m in raw if m not in hydra]
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("a warning that means something", UserWarning, stacklevel=1)
        assert [str(w.message) for w in caught] == ["a warning that means something"]


def test_log_filter_drops_the_tensorboardx_line_only(caplog) -> None:
    quiet.install()
    quiet.install()  # idempotent
    logger = logging.getLogger("fairseq.tasks.text_to_speech")
    assert sum(isinstance(f, quiet.DropMessages) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info("Please install tensorboardX: pip install tensorboardX")
        logger.info("a real line")
    assert [r.getMessage() for r in caplog.records] == ["a real line"]


def test_jit_script_deprecation_dropped_only_while_fairseq_is_imported() -> None:
    message = "`torch.jit.script` is deprecated. Please switch to `torch.compile`"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet.importing_fairseq():
            warnings.warn(message, FutureWarning, stacklevel=1)
        assert caught == []
        warnings.warn(message, FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == [message]


def _run(*args: str) -> str:
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout + res.stderr


def _noise(output: str) -> list[str]:
    return [line for line in output.splitlines() if any(n in line for n in NOISE)]


def test_plain_fairseq_import_prints_the_tensorboardx_line() -> None:
    """The noise is real (so the checks below can fail): fairseq alone prints it."""
    pytest.importorskip("fairseq")
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("tensorboardX is installed: fairseq does not print the line")
    assert "Please install tensorboardX" in _run("-c", "import fairseq.tasks")


@pytest.mark.parametrize(
    "module", ["localnmt.runs.train", "localnmt.analysis.locality_bias", "localnmt.translate"]
)
def test_help_is_quiet(module) -> None:
    output = _run("-m", module, "--help")
    assert "usage:" in output and _noise(output) == []


def test_training_log_is_quiet_and_keeps_fairseqs_lines(tiny_data, tmp_path) -> None:
    output = _run("-m", "localnmt.runs.train", "--data", str(tiny_data), "--save-dir",
                  str(tmp_path / "ck"), "--size", "tiny", "--cpu", "--max-update", "4",
                  "--", "--max-epoch", "1")  # fmt: skip
    assert _noise(output) == []
    for line in ("num. shared model params", "done training", "| train | epoch 001"):
        assert line in output, output[-3000:]
