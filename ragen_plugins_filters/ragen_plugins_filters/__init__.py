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

#: name -> (entry point, config class, description)
FILTERS = {
    "none": (f"{_PKG}.filters:NoFilter", f"{_PKG}.config:NoFilterConfig",
             "no filtering: every group trains (filter metrics still reported)"),
    "top_p": (f"{_PKG}.filters:TopPFilter", f"{_PKG}.config:TopPConfig",
              "RAGEN-2 SNR-adaptive top-p over group scores (linear, value 0.9; or softmax)"),
    "top_k": (f"{_PKG}.filters:TopKFilter", f"{_PKG}.config:TopKConfig",
              "the int(value x groups) best groups, at least 1 (StarPO-S: top 25% by reward std)"),
    "top_k_abs": (f"{_PKG}.filters:TopKAbsFilter", f"{_PKG}.config:TopKAbsConfig",
                  "the int(value) best groups"),
    "min_p": (f"{_PKG}.filters:MinPFilter", f"{_PKG}.config:MinPConfig",
              "groups scoring >= value x the best score (smallest: <= min / value)"),
    "dynamic": (f"{_PKG}.dynamic:DynamicSampling", f"{_PKG}.config:DynamicSamplingConfig",
                "DAPO dynamic sampling: drop zero-variance groups, roll out more up to max_rounds"),
}


@hookimpl
def ragen_register_filters(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register every built-in rollout filter."""
    for name, (entry_point, config, description) in FILTERS.items():
        registry.register(name, entry_point, config=config, description=description)
