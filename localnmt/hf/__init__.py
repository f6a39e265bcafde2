"""localnmt's methods in Hugging Face transformers models (MarianMT, BART / mBART,
M2M100 / NLLB; T5 / mT5 / UMT5 from transformers 5.15.0): a thin adapter over the
framework-free core (docs/huggingface.md)::

    import localnmt.hf
    model = MarianMTModel(MarianConfig(...))          # or .from_pretrained(...)
    localnmt.hf.apply(model, encoder_self="localness[window=query]", cross="gmm[k=4]")
    model.save_pretrained(folder)
    model = localnmt.hf.from_pretrained(MarianMTModel, folder)   # the same model

Importing this package imports neither transformers nor fairseq; :func:`apply` checks the
installed transformers (:data:`~localnmt.hf.versions.REQUIREMENT`).
"""

from localnmt.hf.attach import apply, from_pretrained
from localnmt.hf.attention import NAME, localnmt_attention, register
from localnmt.hf.versions import REQUIREMENT, TransformersVersionError, require_transformers

__all__ = [
    "NAME",
    "REQUIREMENT",
    "TransformersVersionError",
    "apply",
    "from_pretrained",
    "localnmt_attention",
    "register",
    "require_transformers",
]
