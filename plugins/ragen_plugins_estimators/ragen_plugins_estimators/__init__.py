"""ragen's advantage estimators, a plugin like any other (entry point ``estimators`` in the group ``ragen``).

``gae`` and ``bilevel_gae`` need a critic; ``grpo``, ``drgrpo``, ``rloo``, ``reinforce_pp``,
``reinforce_pp_baseline`` and ``gigpo`` do not. Every estimator is a class built from its attrs config
(``config_cls``) whose ``compute(AdvantageInput) -> AdvantageOutput`` works on NumPy float64 arrays. Registration is
lazy: this module imports nothing but the hook marker.
"""

from ragen_core import hookimpl

_PKG = "ragen_plugins_estimators"

@hookimpl
def ragen_register_estimators(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register every built-in advantage estimator."""
    r = registry.register
    r("gae", f"{_PKG}.gae:GAE", needs_critic=True, default=True,
      description="PPO's GAE over generated tokens (observation tokens skipped), whitened over the batch")
    r("bilevel_gae", f"{_PKG}.gae:BiLevelGAE", needs_critic=True,
      description="turn-level GAE (gamma 0.95) across turns, then token-level GAE inside each turn")
    r("grpo", f"{_PKG}.outcome:GRPO",
      description="GRPO: episode score normalised by its group's mean and unbiased std, on every generated token")
    r("drgrpo", f"{_PKG}.outcome:DrGRPO", description="Dr.GRPO: episode score minus its group's mean (no std)")
    r("rloo", f"{_PKG}.outcome:RLOO",
      description="RLOO: episode score minus the mean of the other episodes of its group")
    r("reinforce_pp", f"{_PKG}.outcome:ReinforcePP",
      description="REINFORCE++: discounted token returns whitened over the batch")
    r("reinforce_pp_baseline", f"{_PKG}.outcome:ReinforcePPBaseline",
      description="REINFORCE++ with baseline: score minus group mean, whitened over the batch")
    r("gigpo", f"{_PKG}.gigpo:GiGPO",
      description="GiGPO: episode-level GRPO advantage plus step-level advantage among turns from identical states")
