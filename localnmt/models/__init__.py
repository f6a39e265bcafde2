"""Models of localnmt (registered with fairseq on import)."""

from localnmt.models import (
    architectures,  # noqa: F401,I001
    transformer,  # noqa: F401  (registers the model first)
)
