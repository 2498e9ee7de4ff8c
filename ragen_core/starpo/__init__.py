"""The StarPO layer of the core: what every trainer, ``ragen eval`` and ``ragen rollout`` share to run multi-turn
episodes and train on them, beside the plugin framework (hooks, registries, config, runs) in :mod:`ragen_core`.

- :mod:`~ragen_core.starpo.rollout`: episodes as generators, the lockstep and async drivers, scripted policies;
- :mod:`~ragen_core.starpo.chat`: the prompt (system and user messages) and the chat codec;
- :mod:`~ragen_core.starpo.batching`: trajectories into token-level training samples;
- :mod:`~ragen_core.starpo.shape`: rollout hints and how a config's rollout shape follows its envs;
- :mod:`~ragen_core.starpo.metrics`: the rollout metrics every driver reports;
- :mod:`~ragen_core.starpo.ppo`: the PPO options both trainers read.

Importing this package imports none of them.
"""
