"""ragen's reasoning-gym adapter: every reasoning-gym dataset as a single-turn ragen env (``env: reasoning_gym``
with ``dataset``, or ``env: rg.<dataset>``). Importing this package does no work; see
:mod:`ragen_plugins_reasoning_gym.env` (the env), :mod:`ragen_plugins_reasoning_gym.catalogue` (datasets and their
options) and :mod:`ragen_plugins_reasoning_gym.screen` (answers a scorer would execute are refused)."""
