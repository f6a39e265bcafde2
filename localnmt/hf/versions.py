"""Which transformers versions the adapter runs with, checked once with one clear error.

The lower bound is the first release whose MarianMT, BART / mBART and M2M100 / NLLB attention
layers dispatch through ``transformers.AttentionInterface`` (4.53.0: the registry itself came
in 4.48, but these models called their own eager / SDPA code until 4.53). The upper bound is
the next major release, whose interfaces nobody has seen. Tested: 4.53.0, 5.24.0 and 5.25.0.

T5, mT5 and UMT5 need more: :data:`T5_DISPATCH`, the first release whose T5 attention calls
the attention function with its relative position bias (``position_bias=``) instead of
computing eager / SDPA attention in the layer itself (4.53.0 to 5.14.1 do; read from the
releases' ``modeling_t5.py``, ``modeling_mt5.py`` and ``modeling_umt5.py``). T5 tested: 5.15.0
and 5.24.0.
"""

from __future__ import annotations

from localnmt.attention.modifier import SpecError
from localnmt.errors import UsageError

#: ``pip install localnmt[hf]`` asks for this range (setup.py reads it from here).
REQUIREMENT = "transformers>=4.53,<6"
OLDEST = (4, 53)
BEYOND = (6, 0)
TESTED = ("4.53.0", "5.24.0", "5.25.0")
T5_DISPATCH = "5.15.0"


class TransformersVersionError(UsageError):
    """transformers is missing or outside the supported range."""


def release(version: str) -> tuple[int, int]:
    """``'4.53.0.dev0'`` → ``(4, 53)``."""
    major, minor = (version.split(".") + ["0"])[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def check_version(version: str) -> None:
    """Raise one line saying what to install when ``version`` is outside the range."""
    if not OLDEST <= release(version) < BEYOND:
        raise TransformersVersionError(
            f"localnmt.hf needs {REQUIREMENT} (tested {', '.join(TESTED)}), found "
            f"transformers {version}: pip install 'localnmt[hf]'"
        )


def require_transformers() -> str:
    """The installed transformers version, checked; one line when missing or out of range."""
    try:
        import transformers
    except ImportError as err:
        raise TransformersVersionError(
            f"localnmt.hf needs {REQUIREMENT}: pip install 'localnmt[hf]' ({err})"
        ) from None
    check_version(transformers.__version__)
    return transformers.__version__


def check_t5_version(version: str, model_type: str = "t5") -> None:
    """Raise one line naming ``version`` and :data:`T5_DISPATCH` when that transformers
    computes ``model_type``'s attention inside the layer (no attention function to run)."""
    if release(version) < release(T5_DISPATCH):
        raise SpecError(
            f"localnmt.hf supports {model_type} from transformers {T5_DISPATCH} on, found "
            f"transformers {version}, whose {model_type} attention does not dispatch through "
            f"AttentionInterface: pip install 'transformers>={T5_DISPATCH},<6'"
        )


def require_t5_dispatch(model_type: str = "t5") -> str:
    """The installed transformers version, checked for ``model_type`` (T5, mT5, UMT5)."""
    version = require_transformers()
    check_t5_version(version, model_type)
    return version
