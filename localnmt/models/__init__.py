"""Models of localnmt (registered with fairseq on import)."""

from localnmt.models import architectures, transformer

__all__ = ["architectures", "transformer"]
