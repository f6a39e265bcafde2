"""The attention core imports no framework; the fairseq plugin lives in its own subpackage."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from localnmt import paths

BLOCK_FAIRSEQ = """
import sys
class _NoFairseq:
    def find_spec(self, name, path=None, target=None):
        if name == "fairseq" or name.startswith(("fairseq.", "fairseq_cli")):
            raise ImportError("importing fairseq is not allowed in this test")
sys.meta_path.insert(0, _NoFairseq())
"""


def _python(code: str) -> subprocess.CompletedProcess:
    program = BLOCK_FAIRSEQ + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)


def test_the_core_runs_where_importing_fairseq_raises() -> None:
    res = _python("""
        import torch
        import localnmt, localnmt.attention
        from localnmt.attention.layers import LocalCrossAttention, LocalSelfAttention
        torch.manual_seed(0)
        enc = LocalSelfAttention(16, 4, "localness[window=query] + rel_pos[clip=4]")
        cross = LocalCrossAttention(16, 4, "gmm[k=2]")
        x = torch.randn(2, 5, 16)
        y = cross(x, enc(x))
        assert y.shape == (2, 5, 16) and torch.isfinite(y).all()
        assert not any(m.split(".")[0] in ("fairseq", "fairseq_cli") for m in sys.modules)
        print("core ok")
    """)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "core ok" in res.stdout


def test_the_plugin_is_what_localnmt_path_prints() -> None:
    res = subprocess.run([sys.executable, "-m", "localnmt.paths"], capture_output=True, text=True)
    assert res.returncode == 0
    assert res.stdout.strip() == str(paths.PLUGIN_DIR)
    assert paths.PLUGIN_DIR.parent == paths.PACKAGE_DIR
    assert not (paths.PLUGIN_DIR / "models").exists()  # fairseq would import it a second time


def test_both_user_dirs_register_the_models_once() -> None:
    """fairseq's ``import_user_module`` with the plugin folder (new) and the package folder
    (command lines and checkpoints from before the plugin had its own subpackage), in either
    order: the architectures are registered, nothing twice, and the plugin folder's parent is
    not left on ``sys.path``."""
    for first, second in (
        (paths.PLUGIN_DIR, paths.PACKAGE_DIR),
        (paths.PACKAGE_DIR, paths.PLUGIN_DIR),
    ):
        code = f"""
            import sys
            from argparse import Namespace
            from fairseq import utils
            from fairseq.models import ARCH_MODEL_REGISTRY
            utils.import_user_module(Namespace(user_dir={str(first)!r}))
            utils.import_user_module(Namespace(user_dir={str(second)!r}))
            assert "localnmt_tiny" in ARCH_MODEL_REGISTRY, sorted(ARCH_MODEL_REGISTRY)[:5]
            assert {str(paths.PACKAGE_DIR)!r} not in sys.path
            import localnmt.fairseq_plugin as plugin
            assert sys.modules.get("fairseq_plugin", plugin) is plugin
            print("registered")
        """
        res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                             text=True)  # fmt: skip
        assert res.returncode == 0, (first, res.stderr[-2000:])
        assert "registered" in res.stdout
