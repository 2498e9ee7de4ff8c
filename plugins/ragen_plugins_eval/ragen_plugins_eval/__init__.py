"""ragen's standalone evaluation (entry point ``eval`` in the group ``ragen``): the ``ragen eval --model MODEL``
command (any policy backend on env variants, pass@k / avg@k, trajectories as JSONL, resumable) and the ``openai``
policy backend (an OpenAI-compatible HTTP endpoint, standard library only). Nothing heavy is imported here."""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl


@hookimpl
def ragen_register_policies(registry: Any) -> None:
    """Register the ``openai`` policy backend (``http://`` and ``https://`` models)."""
    registry.register(
        "openai", "ragen_plugins_eval.http_backend:OpenAIPolicy", config="ragen_plugins_eval.http_backend:OpenAIConfig",
        schemes=("http", "https"),
        description="an OpenAI-compatible HTTP endpoint (/v1/completions or /v1/chat/completions): vLLM, ragen serve",
    )


@hookimpl
def ragen_register_commands(cli: Any) -> None:
    """Add ``ragen eval`` (the standalone evaluation; without ``--model``, the trainer's validation as before)."""
    from .command import add_eval_command

    add_eval_command(cli)
