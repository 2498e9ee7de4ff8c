"""The ``echo_trap`` diagnostic: how repetitive the reasoning is (RAGEN's "Echo Trap": the policy converges on a
few reasoning strings it repeats whatever the state).

Works on the parsed reasoning of each turn (``Turn.reasoning``, the text between ``<think>`` and ``</think>``), so it
needs no scorer. Strings are compared after lower-casing and collapsing whitespace; n-grams are over whitespace
words, within one reasoning string. Trajectories whose env raised are left out. Metrics (``echo_trap/…``):

- ``reasoning_rate``: turns with non-empty reasoning / turns;
- ``duplicate_rate``: 1 − distinct reasoning strings / non-empty reasoning strings (0: all different; → 1: one
  string everywhere);
- ``cross_trajectory_duplicate_rate``: share of non-empty reasoning strings that also occur in another trajectory;
- ``cross_group_duplicate_rate``: share that also occur in another group — another initial state, so the strongest
  sign that the reasoning ignores the input;
- ``distinct_1`` / ``distinct_2``: distinct word unigrams / bigrams over all unigrams / bigrams (low = repetitive);
- ``reasoning_words_mean``: mean words per non-empty reasoning.

Nothing is reported that is undefined: without turns nothing at all; without reasoning only ``reasoning_rate``;
``distinct_2`` only when some reasoning has two words.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

__all__ = ["EchoTrap", "echo_metrics"]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def echo_metrics(items: list[tuple[int, int, str]], n_turns: int) -> dict[str, float]:
    """The metrics from ``(trajectory index, group id, reasoning)`` per turn with reasoning, and the turn count."""
    if not n_turns:
        return {}
    texts = [(t, g, _norm(r)) for t, g, r in items if _norm(r)]
    out = {"echo_trap/reasoning_rate": len(texts) / n_turns}
    if not texts:
        return out
    trajs: dict[str, set[int]] = defaultdict(set)
    groups: dict[str, set[int]] = defaultdict(set)
    for t, g, s in texts:
        trajs[s].add(t)
        groups[s].add(g)
    out["echo_trap/duplicate_rate"] = 1.0 - len(trajs) / len(texts)
    out["echo_trap/cross_trajectory_duplicate_rate"] = sum(len(trajs[s]) > 1 for _t, _g, s in texts) / len(texts)
    out["echo_trap/cross_group_duplicate_rate"] = sum(len(groups[s]) > 1 for _t, _g, s in texts) / len(texts)
    words = [s.split() for _t, _g, s in texts]
    unigrams = [w for ws in words for w in ws]
    bigrams = [tuple(ws[i:i + 2]) for ws in words for i in range(len(ws) - 1)]
    out["echo_trap/distinct_1"] = len(set(unigrams)) / len(unigrams)
    if bigrams:
        out["echo_trap/distinct_2"] = len(set(bigrams)) / len(bigrams)
    out["echo_trap/reasoning_words_mean"] = len(unigrams) / len(texts)
    return out


class EchoTrap:
    """The ``echo_trap`` diagnostic (no options, no scorer needed; see the module docstring)."""

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def compute(self, ctx: Any) -> dict[str, float]:
        """``echo_trap/*`` metrics of the context's batch."""
        items: list[tuple[int, int, str]] = []
        n_turns = 0
        for idx, traj in enumerate(ctx.batch):
            if traj.env_error is not None:
                continue
            n_turns += len(traj.turns)
            items += [(idx, traj.group_id, turn.reasoning) for turn in traj.turns]
        return echo_metrics(items, n_turns)
