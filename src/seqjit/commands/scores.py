"""The two scores the JSON outputs give every hypothesis, on one scale whatever the search.

``generate`` scores a greedy or sampled hypothesis by the sum of its tokens' log-probabilities and a
beam hypothesis by that sum divided by ``length ** length_penalty`` (as ``transformers`` ranks
them); one name for both would put two scales in one column. Each hypothesis is therefore given:

- ``score``: the sum of its tokens' log-probabilities (the end token included when it ended);
- ``normalized_score``: ``score / length ** length_penalty`` (what beam search ranks by).

``length`` counts the end token when the hypothesis ended with it (it then has fewer than
``max_length`` ids once the end token is dropped).
"""
from __future__ import annotations

import math


def output_length(ids, max_length: int) -> int:
    """Tokens ``generate`` produced for ``ids`` (the end token dropped): one more unless the
    hypothesis ran to ``max_length`` without ending."""
    return len(ids) if len(ids) >= max_length else len(ids) + 1


def both_scores(score: float, length: int, *, beam: bool, length_penalty: float = 1.0) -> dict:
    """``{"score", "normalized_score"}`` of a hypothesis of ``length`` tokens (:func:`output_length`)
    from the score ``generate`` returned for it; None for a non-finite value (JSON has no NaN or
    Infinity)."""
    divisor = max(1, length) ** length_penalty
    total, normalized = (score * divisor, score) if beam else (score, score / divisor)

    def finite(x):
        return x if math.isfinite(x) else None
    return {"score": finite(total), "normalized_score": finite(normalized)}
