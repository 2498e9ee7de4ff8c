"""The selection rules (RAGEN-2's, see REFERENCE §5), as pure functions of the candidates' scores.

Each rule takes the candidate scores in the batch's first-seen group order and returns the positions it keeps.

Ranking and ties: candidates are ranked by score — descending for ``largest``, ascending for ``smallest`` — with a
stable sort, so equal scores keep their first-seen order (the earlier group ranks first). Every rule that takes a
prefix of the ranking (``top_p``, ``top_k``, ``top_k_abs``) therefore breaks ties towards the earlier group.

``smallest`` follows RAGEN: ``linear`` top-p walks the ascending ranking with the same threshold and the same
"a score <= 0 ends the walk" rule; ``softmax`` top-p takes the softmax of the negated scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["MIN_P_TOL", "min_p", "ranked", "top_k", "top_p_linear", "top_p_softmax"]

#: slack of the ``min_p`` comparisons (RAGEN's), so the extreme group itself survives rounding
MIN_P_TOL = 1e-10


def ranked(scores: Sequence[float], order: str) -> list[int]:
    """Positions of ``scores`` best first (``largest``: descending, ``smallest``: ascending), ties by position."""
    if order == "largest":
        return sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(range(len(scores)), key=lambda i: (scores[i], i))


def _total(scores: Sequence[float]) -> float:
    try:
        return math.fsum(scores)
    except OverflowError:
        raise ValueError("the group scores are too large to sum (top_p needs their total)") from None


def top_p_linear(scores: Sequence[float], value: float, eps: float, order: str = "largest") -> list[int]:
    """RAGEN-2's linear top-p.

    ``value >= 1`` keeps every candidate. Otherwise threshold = ``value × sum(scores) − eps``; walk the ranking adding
    scores, stopping as soon as the running sum reaches the threshold or at the first score ``<= 0``; keep the walked
    prefix if the threshold was reached, else nothing (so an all-zero batch keeps nothing).
    """
    if value >= 1.0:
        return list(range(len(scores)))
    order_ = ranked(scores, order)
    threshold = value * _total(scores) - eps
    running, taken = 0.0, 0
    for i in order_:
        if running >= threshold or scores[i] <= 0:
            break
        running += scores[i]
        taken += 1
    return order_[:taken] if running >= threshold else []


def top_p_softmax(scores: Sequence[float], value: float, order: str = "largest") -> list[int]:
    """Softmax top-p: probabilities = softmax(scores) (of ``-scores`` for ``smallest``); keep the shortest prefix of
    the ranking whose cumulative probability reaches ``value`` — always at least one candidate when there is one."""
    if value >= 1.0 or not scores:
        return list(range(len(scores)))
    logits = [s if order == "largest" else -s for s in scores]
    top = max(logits)
    weights = [math.exp(v - top) for v in logits]
    norm = math.fsum(weights)
    order_ = ranked(scores, order)
    cumulative = 0.0
    for k, i in enumerate(order_, start=1):
        cumulative += weights[i] / norm
        if cumulative >= value:
            return order_[:k]
    return order_


def top_k(scores: Sequence[float], k: int, order: str = "largest") -> list[int]:
    """The ``k`` best candidates (all when ``k`` exceeds their number)."""
    return ranked(scores, order)[:max(0, k)]


def min_p(scores: Sequence[float], value: float, order: str = "largest") -> list[int]:
    """``largest``: scores ``>= value × max``; ``smallest``: scores ``<= min / value`` (both with a 1e-10 slack).

    As in RAGEN, the rule is relative to the extreme score: with a negative max (``largest``) or negative min
    (``smallest``) and ``value < 1`` it can keep nothing.
    """
    if not scores:
        return []
    if order == "largest":
        cut = value * max(scores)
        return [i for i, s in enumerate(scores) if s >= cut - MIN_P_TOL]
    cut = min(scores) / value
    return [i for i, s in enumerate(scores) if s <= cut + MIN_P_TOL]
