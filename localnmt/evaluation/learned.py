"""When a trained model's score may be shown as a result: the run learned something.

One criterion for every command that reports a score of a model it trained (the quickstart's
report, the transformers example): a BLEU of at least :data:`MIN_BLEU` and a loss that went
down from its first reading to its last. A run that fails it is reported as not having
learned, not as a result.
"""

from __future__ import annotations

from collections.abc import Sequence

#: the smallest corpus BLEU counted as having learned something
MIN_BLEU = 1.0


def learned(bleu: float, losses: Sequence[float]) -> bool:
    """BLEU of at least :data:`MIN_BLEU` and a loss (validation or training, in the order
    measured) whose last reading is below its first."""
    return bleu >= MIN_BLEU and len(losses) >= 2 and losses[-1] < losses[0]
