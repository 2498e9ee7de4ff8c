"""ragen's advantage estimators, a plugin like any other (entry point ``estimators`` in the group ``ragen``).

``gae`` and ``bilevel_gae`` need a critic; ``grpo``, ``drgrpo``, ``rloo``, ``reinforce_pp``,
``reinforce_pp_baseline`` and ``gigpo`` do not. Every estimator is a class built from its attrs config
(``config_cls``) whose ``compute(AdvantageInput) -> AdvantageOutput`` works on NumPy float64 arrays. Registration is
lazy: this module imports nothing but the hook marker.
"""

from ragen_core import hookimpl

_PKG = "ragen_plugins_estimators"

#: name -> (entry point, needs_critic, description)
ESTIMATORS = {
    "gae": (f"{_PKG}.gae:GAE", True,
            "PPO's GAE over generated tokens (observation tokens skipped), whitened over the batch"),
    "bilevel_gae": (f"{_PKG}.gae:BiLevelGAE", True,
                    "turn-level GAE (gamma 0.95) across turns, then token-level GAE inside each turn"),
    "grpo": (f"{_PKG}.outcome:GRPO", False,
             "GRPO: episode score normalised by its group's mean and unbiased std, on every generated token"),
    "drgrpo": (f"{_PKG}.outcome:DrGRPO", False, "Dr.GRPO: episode score minus its group's mean (no std)"),
    "rloo": (f"{_PKG}.outcome:RLOO", False, "RLOO: episode score minus the mean of the other episodes of its group"),
    "reinforce_pp": (f"{_PKG}.outcome:ReinforcePP", False,
                     "REINFORCE++: discounted token returns whitened over the batch"),
    "reinforce_pp_baseline": (f"{_PKG}.outcome:ReinforcePPBaseline", False,
                              "REINFORCE++ with baseline: score minus group mean, whitened over the batch"),
    "gigpo": (f"{_PKG}.gigpo:GiGPO", False,
              "GiGPO: episode-level GRPO advantage plus step-level advantage among turns from identical states"),
}


@hookimpl
def ragen_register_estimators(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register every built-in advantage estimator."""
    for name, (entry_point, needs_critic, description) in ESTIMATORS.items():
        registry.register(name, entry_point, needs_critic=needs_critic, description=description)
