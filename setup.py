"""localnmt: every published way of making Transformer attention local, as a fairseq plugin."""

import importlib.util
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# The one place where the fairseq build is chosen (see README, "Why this fairseq build").
# fairseq==0.12.2 does not import on Python 3.11; ve-fairseq 0.12.3 is a binary wheel (cp311,
# cp312) of upstream fairseq (2024-10) with the Python 3.11 dataclass patch. Python 3.10 has no
# such wheel and gets "fairseq-fixed==0.12.3.1" (a source build with the same patch, about
# 3-5 min; it needs torch at build time, README). Swapping it in everywhere is one line here.
FAIRSEQ_REQUIREMENTS = [
    've-fairseq==0.12.3; python_version >= "3.11"',
    'fairseq-fixed==0.12.3.1; python_version < "3.11"',
]
# The ranges that were tried (docs/install.md): torch 2.1.2 (the oldest, run by CI:
# scripts/test_oldest_torch.sh; it needs numpy<2, which pip cannot be told from here) to
# 2.15.0 (the newest release); Python 3.10 (torch 2.14.1, fairseq-fixed) and 3.11. 3.13 has
# no ve-fairseq wheel (not tried).
TORCH_REQUIREMENT = "torch>=2.1"
PYTHON_REQUIREMENT = ">=3.10,<3.13"


def _cbuild():
    """localnmt/cbuild.py, loaded by path: the package itself needs torch and fairseq."""
    path = Path(__file__).resolve().parent / "localnmt" / "cbuild.py"
    spec = importlib.util.spec_from_file_location("localnmt_cbuild", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The C kernels split their sentences among torch's own threads through OpenMP (csrc/builds.h).
OPENMP = ["-fopenmp"]


class BuildExt(build_ext):
    """Builds each C kernel with OpenMP, or without where the compiler has none (Apple's
    clang): the kernels then split their work among threads of their own."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception:  # CompileError or LinkError: try once more without OpenMP
            if OPENMP[0] not in ext.extra_compile_args:
                raise
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a not in OPENMP]
            ext.extra_link_args = [a for a in ext.extra_link_args if a not in OPENMP]
            super().build_extension(ext)


CSRC = Path(__file__).resolve().parent / "localnmt" / "csrc"
source_digest = _cbuild().source_digest

setup(
    name="localnmt",
    version="0.1.0",
    description="Local attention for fairseq NMT: Localness, GMM, CSAN, local heads",
    # configs/ (the experiments as data) stays at the top of the repository and is installed
    # as the package data localnmt/configs/, where localnmt.config_files finds it
    packages=[*find_packages(include=["localnmt", "localnmt.*"]), "localnmt.configs"],
    package_dir={"localnmt.configs": "configs"},
    package_data={"localnmt.configs": ["*.yaml"]},
    # Four small C kernels without torch headers: GMM cross-attention's decoding step
    # (localnmt/attention/fast/gmm_step.py), its mixture forward and backward
    # (fast/gmm_mixture.py), band attention on the CPU (fast/band.py) and attention with
    # relative positions on the CPU (fast/relative.py).
    # Optional: where they do not build (no C compiler), the same numbers come from torch ops.
    ext_modules=[
        Extension(
            f"localnmt.{name}",
            [f"localnmt/csrc/{source}"],
            depends=[f"localnmt/csrc/{h.name}" for h in sorted(CSRC.glob("*.h"))],
            # the module reports what it was built from; an editable install whose sources
            # changed since then falls back to torch ops with a warning (localnmt/cbuild.py)
            define_macros=[("LOCALNMT_SOURCE_DIGEST", f'"{source_digest(source, CSRC)}"')],
            extra_compile_args=["-O3", "-fno-trapping-math", *OPENMP],
            extra_link_args=OPENMP,
            optional=True,
        )
        for name, source in (
            ("_gmm_step", "gmm_step.c"),
            ("_gmm_mixture", "gmm_mixture.c"),
            ("_band", "band.c"),
            ("_relative", "relative.c"),
        )
    ],
    cmdclass={"build_ext": BuildExt},
    python_requires=PYTHON_REQUIREMENT,
    install_requires=[
        TORCH_REQUIREMENT,
        *FAIRSEQ_REQUIREMENTS,
        "sacrebleu>=2.3",
        "sentencepiece>=0.1.99",
        "subword-nmt>=0.3.8",
        "sacremoses>=0.0.53",
        "jieba>=0.42",
        "janome>=0.5",
        "matplotlib>=3.7",
        "numpy",  # <2 with torch < 2.3 (localnmt.torch_compat.numpy_problem)
        "pyyaml>=5.1",
    ],
    extras_require={
        # peft: tests/hf/test_peft.py (a LoRA fine-tune of a model with methods)
        "dev": ["pytest>=7", "pytest-xdist>=3", "ruff>=0.4", "peft>=0.21"],
        # localnmt.hf (docs/huggingface.md); the range is localnmt.hf.versions.REQUIREMENT,
        # tested with 4.53.0, 5.24.0 and 5.25.0; accelerate for transformers' Trainer
        "hf": ["transformers>=4.53,<6", "accelerate>=0.26"],
    },
    entry_points={
        "console_scripts": [
            "localnmt-path=localnmt.paths:main",
            "localnmt-translate=localnmt.translate:main",
            "localnmt-train=localnmt.runs.train:main",
            "localnmt-check=localnmt.check:main",
        ]
    },
)
