"""Registration of the theorem-proving envs (Lean through a Kimina server, Coq through coqtop) and their variants.

Light on purpose: nothing is imported here; the registry loads each env class from its entry-point string on first
use, and no env connects to a server or starts a process before its first reset.

Envs and variants:

- ``lean``: Lean 4 + Mathlib through a **real** Kimina Lean server at ``server_url`` (default
  ``http://127.0.0.1:8000``); RAGEN's Lean env;
- ``lean_double``: the same env against the local Kimina protocol *test double* (started on 127.0.0.1, no Lean
  needed; for tests and offline demos; it only knows the built-in theorems' recorded proofs);
- ``coq``: Coq through a persistent ``coqtop`` (``apt-get install coq``), 42 built-in theorems;
- ``coq_nat``, ``coq_list``, ``coq_logic``, ``coq_bool``: the Coq theorems of one topic.
"""

from __future__ import annotations

from typing import Any

from ragen_core.registry import RolloutHints
from ragen_plugins_envs.registration_guides import GUIDES

__all__ = ["PROVER_ENVS", "PROVER_HINTS", "PROVER_VARIANTS", "register_prover_envs"]

#: name -> (entry point, config class, description)
PROVER_ENVS: dict[str, tuple[str, str, str]] = {
    "lean": (
        "ragen_plugins_envs.prover.lean:LeanEnv", "ragen_plugins_envs.prover.lean:LeanConfig",
        "Lean 4 theorem proving, one tactic per step, checked by a Kimina Lean server (server_url)",
    ),
    "coq": (
        "ragen_plugins_envs.prover.coq:CoqEnv", "ragen_plugins_envs.prover.coq:CoqConfig",
        "Coq theorem proving, one tactic per step, checked by a persistent coqtop (naturals, booleans, lists, logic)",
    ),
}

#: name -> (base env, params, description)
PROVER_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "lean_double": ("lean", {"use_double": True},
                    "Lean env against the local Kimina protocol test double (no Lean needed; recorded proofs only)"),
    "coq_nat": ("coq", {"topic": "nat"}, "Coq theorems about natural numbers"),
    "coq_list": ("coq", {"topic": "list"}, "Coq theorems about lists"),
    "coq_logic": ("coq", {"topic": "logic"}, "Coq theorems of propositional and first-order logic"),
    "coq_bool": ("coq", {"topic": "bool"}, "Coq theorems about booleans"),
}


#: env name -> how its rollouts are shaped: the 20 steps of an episode as 10 turns of up to 2 tactics; an answer is
#: two tactics, its reasoning a few sentences about the goal
PROVER_HINTS: dict[str, RolloutHints] = {
    "lean": RolloutHints(max_turn=10, max_actions_per_turn=2, answer_tokens=64, think_tokens=64),
    "coq": RolloutHints(max_turn=10, max_actions_per_turn=2, answer_tokens=64, think_tokens=64),
}


def register_prover_envs(registry: Any) -> None:
    """Register ``lean``, ``coq`` and their variants on an env registry (``EnvRegistry``)."""
    for name, (entry_point, config, description) in PROVER_ENVS.items():
        registry.register(name, entry_point, config=config, description=description, hints=PROVER_HINTS[name],
                          guide=GUIDES.get(name, {}))
    for name, (env, params, description) in PROVER_VARIANTS.items():
        registry.register_variant(name, env=env, params=dict(params), description=description)
