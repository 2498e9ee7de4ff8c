"""ragen's rollout filters, a plugin like any other (entry point ``filters`` in the group ``ragen``).

Filters (``filter: {name: ..., ...}``; options in :mod:`ragen_plugins_filters.config`):

- ``none`` — keeps every group (the default); the filter metrics are still reported;
- ``top_p`` — RAGEN-2's SNR-adaptive filter, ``mode: linear`` (recommended, ``value`` 0.9, ``eps`` 0.01) or
  ``softmax``;
- ``top_k`` — the best ``int(value × groups)`` groups (at least 1); ``top_k_abs`` — the best ``int(value)``;
- ``min_p`` — groups scoring ``>= value × max`` (``smallest``: ``<= min / value``);
- ``dynamic`` — DAPO-style dynamic sampling (drops zero-variance groups; see :mod:`ragen_plugins_filters.dynamic`).

Ranking metric (``reward_variance`` = unbiased std by default), order, ``include_zero`` (default True) and
``loss_scale`` are shared options; rules and tie-breaking are in :mod:`ragen_plugins_filters.rules`, scores and
metric definitions in :mod:`ragen_plugins_filters.scores`. Registration is lazy: this module imports nothing but the
hook marker.
"""

from ragen_core import hookimpl

_PKG = "ragen_plugins_filters"

@hookimpl
def ragen_register_filters(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register every built-in rollout filter."""
    r = registry.register
    r("none", f"{_PKG}.filters:NoFilter", config=f"{_PKG}.config:NoFilterConfig", default=True,
      description="no filtering: every group trains (filter metrics still reported)")
    r("top_p", f"{_PKG}.filters:TopPFilter", config=f"{_PKG}.config:TopPConfig",
      description="RAGEN-2 SNR-adaptive top-p over group scores (linear, value 0.9; or softmax)")
    r("top_k", f"{_PKG}.filters:TopKFilter", config=f"{_PKG}.config:TopKConfig",
      description="the int(value x groups) best groups, at least 1 (StarPO-S: top 25% by reward std)")
    r("top_k_abs", f"{_PKG}.filters:TopKAbsFilter", config=f"{_PKG}.config:TopKAbsConfig",
      description="the int(value) best groups")
    r("min_p", f"{_PKG}.filters:MinPFilter", config=f"{_PKG}.config:MinPConfig",
      description="groups scoring >= value x the best score (smallest: <= min / value)")
    r("dynamic", f"{_PKG}.dynamic:DynamicSampling", config=f"{_PKG}.config:DynamicSamplingConfig",
      description="DAPO dynamic sampling: drop zero-variance groups, roll out more up to max_rounds")
