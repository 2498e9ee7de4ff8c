"""Opt-in for plain veRL runs: importing this module registers ragen's estimators in veRL as ``ragen_<name>``.

The one module of ragen whose import does work, on purpose, and only when a veRL user asks for it with veRL's own
switch, which imports the listed modules at ``import verl`` in every veRL process::

    VERL_USE_EXTERNAL_MODULES=ragen_plugins_verl.verl_estimators python -m verl.trainer.main_ppo \\
        algorithm.adv_estimator=ragen_rloo ...

ragen's own trainer does not need it (its trainer mode calls the configured estimator directly). See
:func:`ragen_plugins_verl.verl_plugin.register_estimators` and docs/verl.md.
"""

from __future__ import annotations

from .verl_plugin import register_estimators

__all__ = ["REGISTERED"]

#: what this import registered: ``{veRL name: ragen name}``
REGISTERED: dict[str, str] = register_estimators()
