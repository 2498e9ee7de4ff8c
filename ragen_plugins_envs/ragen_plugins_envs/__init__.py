"""ragen's built-in environments, a plugin like any other (entry point ``envs`` in the group ``ragen``).

Sokoban, FrozenLake, Bandit, Countdown, MetaMathQA, Sudoku, WebShop,
DeepCoder (code run in a bubblewrap sandbox), SearchQA (a
retrieval server over HTTP), Lean (Kimina protocol) and Coq, with RAGEN's named variants. Registration is lazy:
this module imports nothing heavy; each env module is imported when an env is first made.
"""

from ragen_core import hookimpl


@hookimpl
def ragen_register_envs(registry):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Register every built-in env and variant."""
    from ragen_plugins_envs.registration_code import register_code_envs
    from ragen_plugins_envs.registration_grid import register_grid_envs
    from ragen_plugins_envs.registration_prover import register_prover_envs
    from ragen_plugins_envs.registration_search import register_search_envs
    from ragen_plugins_envs.registration_text import register_text_envs
    from ragen_plugins_envs.registration_webshop import register_webshop_envs

    register_grid_envs(registry)
    register_text_envs(registry)
    register_webshop_envs(registry)
    register_prover_envs(registry)
    register_code_envs(registry)
    register_search_envs(registry)


@hookimpl
def ragen_register_commands(cli):  # noqa: ANN001, ANN201 - the hookspec documents the types
    """Add ``ragen retrieval-serve`` (the SearchQA retrieval server)."""
    from ragen_plugins_envs.registration_search import add_search_commands

    add_search_commands(cli)
