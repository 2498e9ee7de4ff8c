"""OpenEnv for ragen (entry point ``openenv`` in the group ``ragen``): the ``openenv`` env (any OpenEnv server, by
URL), the ``remote`` env (a ragen env served by ``ragen env serve`` in another process or machine), and the command
``ragen env serve NAME``. Nothing heavy is imported here."""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl

_CONNECTION = ("Each episode is one session (a WebSocket to the server's /ws); every wait is bounded by `timeout`, "
               "and a server that fails, hangs or dies costs the episodes using it (counted as rollout/env_errors), "
               "never the run. A key is read from the environment variable named by `key_env`.")


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    """Register the ``openenv`` and ``remote`` client envs."""
    registry.register(
        "openenv", "ragen_plugins_openenv.envs:OpenEnvEnv",
        description="any OpenEnv server, by URL: the answer goes into one action field",
        # a server's task is unknown here: a few turns of one free-text action; set rollout.* for yours
        hints={"max_turn": 5, "max_actions_per_turn": 1, "answer_tokens": 64},
        guide={"rules": "Whatever the OpenEnv server at `url` plays; the observation shown is its text field (or the "
                        "whole observation as JSON). " + _CONNECTION,
               "actions": "Free text, put into the action field `action_field` (by default the schema's only "
                          "required one) and converted to its type; text the schema refuses is invalid.",
               "rewards": "The server's rewards; `invalid_reward` for a refused action.",
               "success": "The observation's `success_field` (or `success`) at the end, else a positive final "
                          "reward."},
    )
    registry.register(
        "remote", "ragen_plugins_openenv.envs:RemoteEnv",
        description="a ragen env served by `ragen env serve` elsewhere, used like a local one",
        # the served env's own hints stay on its server (they are read before any connection): a generic shape
        hints={"max_turn": 5, "max_actions_per_turn": 2, "answer_tokens": 32},
        guide={"rules": "The served env's own rules, instruction, action names and legend (sent with the first "
                        "reset). " + _CONNECTION,
               "actions": "The served env's actions.",
               "rewards": "The served env's rewards and info, unchanged.",
               "success": "The served env's `success`."},
    )


@hookimpl
def ragen_register_commands(cli: Any) -> None:
    """Add ``ragen env serve NAME``."""
    from .commands import add_env_commands

    add_env_commands(cli)
