"""Validated options of the rollout filters (attrs classes; every field has a validator).

A config file selects a filter and its options with ``filter: {name: top_p, value: 0.9, metric: reward_variance}``.
An option out of range fails when the config is resolved, with the full key path (``filter.value: must be a number
in (0, 1]: 1.5``).

Shared options of the selecting filters (``top_p``, ``top_k``, ``top_k_abs``, ``min_p``):

- ``metric`` — the per-group score the filter ranks by (default ``reward_variance``):

  - ``reward_variance``: the **unbiased** standard deviation (``n - 1`` denominator) of the group's trajectory
    scores — RAGEN's name says variance, the value is the std; a group with one usable trajectory scores 0;
  - ``reward``: the mean trajectory score; ``reward_sum``: the sum of the trajectory scores;
  - ``entropy``: the mean of the trajectories' ``mean_entropy``; ``entropy_variance``: its unbiased std;
  - ``length``: the mean ``response_length`` (generated tokens) of the trajectories.

- ``order`` — ``largest`` (default) keeps the highest scores, ``smallest`` the lowest.
- ``include_zero`` — default **True**, RAGEN's default: groups scoring 0 stay candidates. ``False`` first drops every
  group whose score is ``<= 1e-10`` in absolute value (e.g. zero-variance groups, which carry no GRPO signal).
- ``loss_scale`` — ``none`` (default, reports 1), ``linear`` (reports the kept ratio) or ``sqrt`` (its square root)
  as ``rollout/filter_loss_scale``; the trainer multiplies the policy loss by it.
"""

from __future__ import annotations

import typing
from typing import Literal

import attrs

from ragen_core.validators import integer, number, one_of

__all__ = [
    "DynamicSamplingConfig",
    "LOSS_SCALES",
    "METRICS",
    "MinPConfig",
    "NoFilterConfig",
    "ORDERS",
    "SelectionConfig",
    "TOP_P_MODES",
    "TopKAbsConfig",
    "TopKConfig",
    "TopPConfig",
]

Metric = Literal["reward_variance", "reward", "reward_sum", "entropy", "entropy_variance", "length"]
Order = Literal["largest", "smallest"]
LossScale = Literal["none", "linear", "sqrt"]
TopPMode = Literal["linear", "softmax"]

#: the per-group scores a filter can rank by
METRICS: tuple[str, ...] = typing.get_args(Metric)
#: which end of the ranking is kept
ORDERS: tuple[str, ...] = typing.get_args(Order)
#: how the kept ratio turns into a loss scale
LOSS_SCALES: tuple[str, ...] = typing.get_args(LossScale)
#: how ``top_p`` turns scores into the mass it accumulates
TOP_P_MODES: tuple[str, ...] = typing.get_args(TopPMode)


_unit_interval = number(0, 1, low_open=True)
_at_least_one = number(1)
_finite_non_negative = number(0)
_positive_int = integer(1)


_bool = attrs.validators.instance_of(bool)


@attrs.frozen(kw_only=True)
class NoFilterConfig:
    """Options of ``none`` (keeps every group): ``metric`` only decides what ``rollout/filter_zero_count`` counts.

    :ivar metric: the per-group score whose zeros ``rollout/filter_zero_count`` counts (see the module docstring).
    """

    metric: Metric = attrs.field(default="reward_variance", validator=one_of(*METRICS))


@attrs.frozen(kw_only=True)
class SelectionConfig:
    """Options shared by the selecting filters (see the module docstring).

    :ivar metric: the per-group score to rank by: ``reward_variance`` (unbiased std of the trajectory scores),
        ``reward`` (mean), ``reward_sum``, ``entropy`` (mean of the trajectories' mean token entropy),
        ``entropy_variance`` (its unbiased std) or ``length`` (mean generated tokens).
    :ivar order: ``largest`` keeps the highest scores, ``smallest`` the lowest.
    :ivar include_zero: False first drops every group whose score is 0 (``<= 1e-10`` in absolute value).
    :ivar loss_scale: multiply the policy loss by 1 (``none``), the kept ratio (``linear``) or its square root
        (``sqrt``); reported as ``rollout/filter_loss_scale``.
    """

    metric: Metric = attrs.field(default="reward_variance", validator=one_of(*METRICS))
    order: Order = attrs.field(default="largest", validator=one_of(*ORDERS))
    include_zero: bool = attrs.field(default=True, validator=_bool)
    loss_scale: LossScale = attrs.field(default="none", validator=one_of(*LOSS_SCALES))


@attrs.frozen(kw_only=True)
class TopPConfig(SelectionConfig):
    """``top_p`` (RAGEN-2's SNR-adaptive filter).

    :ivar value: the share of the total score mass (``linear``) or of the softmax probability (``softmax``) to keep,
        in (0, 1]; 1 keeps every candidate. Default 0.9 (RAGEN-2's recommendation).
    :ivar mode: ``linear`` (default) or ``softmax``.
    :ivar eps: subtracted from the ``linear`` threshold (default 0.01), >= 0.
    """

    value: float = attrs.field(default=0.9, validator=_unit_interval)
    mode: TopPMode = attrs.field(default="linear", validator=one_of(*TOP_P_MODES))
    eps: float = attrs.field(default=0.01, validator=_finite_non_negative)


@attrs.frozen(kw_only=True)
class TopKConfig(SelectionConfig):
    """``top_k``: keep ``int(value × number of groups)`` groups (at least 1), ``value`` in (0, 1].

    Default 0.25: StarPO-S's "top 25% of groups by reward std".

    :ivar value: the share of the groups to keep, in (0, 1].
    """

    value: float = attrs.field(default=0.25, validator=_unit_interval)


@attrs.frozen(kw_only=True)
class TopKAbsConfig(SelectionConfig):
    """``top_k_abs``: keep ``int(value)`` groups, ``value >= 1`` (default 2: a quarter of RAGEN's 8 groups).

    :ivar value: how many groups to keep (the integer part), at least 1.
    """

    value: float = attrs.field(default=2.0, validator=_at_least_one)


@attrs.frozen(kw_only=True)
class MinPConfig(SelectionConfig):
    """``min_p``: keep groups scoring ``>= value × max`` (``smallest``: ``<= min / value``), ``value`` in (0, 1].

    Default 0.5.

    :ivar value: the fraction of the best score a group must reach (``smallest``: the worst score divided by it),
        in (0, 1].
    """

    value: float = attrs.field(default=0.5, validator=_unit_interval)


@attrs.frozen(kw_only=True)
class DynamicSamplingConfig:
    """DAPO-style dynamic sampling (filter ``dynamic``).

    :ivar max_rounds: rollout rounds allowed per step, the first included (default 10, like DAPO's recipes'
        ``max_num_gen_batches``); when they are spent the groups found so far are used.
    :ivar zero_eps: a group whose reward std is ``<= zero_eps`` counts as zero-variance and is dropped (default 1e-10).
    :ivar oversample: :meth:`~ragen_plugins_filters.dynamic.DynamicSampling.needs_more` asks for
        ``ceil(missing × oversample)`` groups (default 1.0; >= 1).
    """

    max_rounds: int = attrs.field(default=10, validator=_positive_int)
    zero_eps: float = attrs.field(default=1e-10, validator=_finite_non_negative)
    oversample: float = attrs.field(default=1.0, validator=_at_least_one)
