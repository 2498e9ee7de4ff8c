"""Theorem-proving environments: tactic-by-tactic proofs checked by a real prover.

- :mod:`ragen_plugins_envs.prover.coq` — :class:`CoqEnv`, driving a persistent ``coqtop`` process per env;
- :mod:`ragen_plugins_envs.prover.lean` — :class:`LeanEnv` and :class:`KiminaClient`, talking to a Kimina Lean server
  over HTTP (RAGEN's Lean env);
- :mod:`ragen_plugins_envs.prover.kimina_double` — a local **test double** of the Kimina server's HTTP protocol for a
  fixed set of theorems (no Lean binary is needed; used by the tests and for offline demos);
- :mod:`ragen_plugins_envs.prover.common` — the shared episode logic and reward rules.

This package module is light: nothing is imported until an env module is used.
"""

__all__ = ["common", "coq", "kimina_double", "lean"]
