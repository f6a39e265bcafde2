"""Shared test settings: one thread (2-core machines, several workers), quiet fairseq."""

import os
import sys
from pathlib import Path

# shared test helpers (``helpers.attention``) import from any test folder
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import localnmt.fairseq_plugin  # noqa: E402,F401  (registers the fairseq models)
from localnmt import torch_compat  # noqa: E402


@pytest.fixture(autouse=True)
def _skip_dtypes_the_cpu_lacks(request):
    """A test parametrized by ``dtype`` skips a dtype this torch cannot multiply on the CPU
    (float16 on older torch)."""
    dtype = getattr(getattr(request.node, "callspec", None), "params", {}).get("dtype")
    if isinstance(dtype, torch.dtype) and not torch_compat.cpu_supports(dtype):
        pytest.skip(f"this torch has no CPU {dtype} matmul")


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A binarised synthetic parallel corpus (see localnmt.testing.make_tiny_corpus)."""
    from localnmt import testing

    root = tmp_path_factory.mktemp("tiny")
    raw = testing.make_tiny_corpus(root / "raw")
    return testing.preprocess(raw, root / "bin")
