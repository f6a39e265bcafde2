"""Fixtures shared by the attention tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["avx512", "avx2", "baseline"])
def build(request):
    """Each build of the test module's C extension (``C_EXTENSION``) this CPU runs; the
    fastest one is used by default and restored after."""
    module = request.module.C_EXTENSION
    if module is None:
        pytest.skip("the C extension was not built (no C compiler)")
    if request.param not in module.builds():
        pytest.skip(f"this CPU does not run the {request.param} build")
    default = module.in_use()
    module.use(request.param)
    yield request.param
    module.use(default)
