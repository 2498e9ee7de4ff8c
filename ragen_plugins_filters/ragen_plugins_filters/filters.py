"""The rollout filters: ``none``, ``top_p``, ``top_k``, ``top_k_abs`` and ``min_p`` (RAGEN-2's SNR-adaptive filtering).

Every filter works the same way on a :class:`~ragen_core.data.RolloutBatch`:

1. score each group by ``metric`` (:mod:`ragen_plugins_filters.scores`; env-error trajectories left out, a group
   whose trajectories all failed is never kept; non-finite values raise ``ValueError`` naming the group);
2. the candidates are the scored groups, minus the zero-score ones when ``include_zero`` is False;
3. apply the rule (:mod:`ragen_plugins_filters.rules`; ties go to the earlier group in first-seen order);
4. return the kept group ids in the batch's first-seen group order, with the metrics of
   :func:`~ragen_plugins_filters.scores.filter_metrics`.

``top_k``'s number of groups is the number of groups in the batch (failed ones included, as RAGEN's fixed
``num_groups``); the kept count is then capped at the number of candidates and is at least 1 when there is one.
Filters are stateless: ``select`` is deterministic and never mutates the batch.
"""

from __future__ import annotations

import abc
from typing import Any

from ragen_core.protocols import FilterResult
from ragen_plugins_filters import rules
from ragen_plugins_filters.config import (
    MinPConfig,
    NoFilterConfig,
    SelectionConfig,
    TopKAbsConfig,
    TopKConfig,
    TopPConfig,
)
from ragen_plugins_filters.scores import ZERO_EPS, GroupTable, filter_metrics, group_table

__all__ = ["MinPFilter", "NoFilter", "TopKAbsFilter", "TopKFilter", "TopPFilter"]


class NoFilter:
    """``none``: keeps every group that has a usable trajectory, and reports the filter metrics."""

    config_cls = NoFilterConfig

    def __init__(self, config: NoFilterConfig) -> None:
        self.config = config

    def select(self, batch: Any) -> FilterResult:
        """Keep every scored group (first-seen order)."""
        table = group_table(batch, self.config.metric)
        kept = tuple(g.group_id for g in table.scored)
        return FilterResult(kept, filter_metrics(table, kept))


class _SelectingFilter(abc.ABC):
    """Steps 1–4 of the module docstring; subclasses implement :meth:`_choose`."""

    config_cls: type = SelectionConfig

    def __init__(self, config: Any) -> None:
        self.config = config

    @abc.abstractmethod
    def _choose(self, scores: list[float], n_groups: int) -> list[int]:
        """Positions (into ``scores``, non-empty) of the kept candidates; ``n_groups`` counts the batch's groups."""

    def select(self, batch: Any) -> FilterResult:
        """Select whole groups of ``batch`` (see the module docstring)."""
        cfg = self.config
        table: GroupTable = group_table(batch, cfg.metric)
        candidates = [g for g in table.scored if cfg.include_zero or abs(g.score) > ZERO_EPS]
        chosen = self._choose([g.score for g in candidates], len(table.group_ids)) if candidates else []
        kept_ids = {candidates[i].group_id for i in chosen}
        kept = tuple(gid for gid in table.group_ids if gid in kept_ids)
        return FilterResult(kept, filter_metrics(table, kept, cfg.loss_scale))


class TopPFilter(_SelectingFilter):
    """``top_p``: RAGEN-2's nucleus-style filter, ``linear`` (default, value 0.9, eps 0.01) or ``softmax``."""

    config_cls = TopPConfig

    def _choose(self, scores: list[float], n_groups: int) -> list[int]:
        cfg = self.config
        if cfg.mode == "softmax":
            return rules.top_p_softmax(scores, cfg.value, cfg.order)
        return rules.top_p_linear(scores, cfg.value, cfg.eps, cfg.order)


class TopKFilter(_SelectingFilter):
    """``top_k``: the ``int(value × number of groups)`` best groups, at least 1 (StarPO-S: value 0.25)."""

    config_cls = TopKConfig

    def _choose(self, scores: list[float], n_groups: int) -> list[int]:
        k = max(1, min(int(self.config.value * n_groups), len(scores)))
        return rules.top_k(scores, k, self.config.order)


class TopKAbsFilter(_SelectingFilter):
    """``top_k_abs``: the ``int(value)`` best groups."""

    config_cls = TopKAbsConfig

    def _choose(self, scores: list[float], n_groups: int) -> list[int]:
        return rules.top_k(scores, int(self.config.value), self.config.order)


class MinPFilter(_SelectingFilter):
    """``min_p``: groups within ``value`` of the best score (``>= value × max``; ``smallest``: ``<= min / value``)."""

    config_cls = MinPConfig

    def _choose(self, scores: list[float], n_groups: int) -> list[int]:
        return rules.min_p(scores, self.config.value, self.config.order)
