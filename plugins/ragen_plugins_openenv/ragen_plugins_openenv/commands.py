"""``ragen env serve NAME``: serve a registered ragen env over OpenEnv's protocol (see :mod:`.server`)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

__all__ = ["add_env_commands", "env_options"]


def env_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``-o KEY=VALUE`` pairs as env options (values typed as YAML, dotted keys nested)."""
    from ragen_core.overrides import parse_override

    options: dict[str, Any] = {}
    for pair in pairs:
        keys, value = parse_override(pair)
        node = options
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return options


def add_env_commands(cli: click.Group) -> None:
    """Add ``ragen env serve`` (in the ``env`` group, made when no plugin has made it yet)."""
    group = cli.commands.get("env")
    if not isinstance(group, click.Group):
        @cli.group("env", cls=type(cli))
        def env_group() -> None:
            """Environments as a service: serve a registered env over HTTP (OpenEnv's protocol)."""

        group = env_group

    from .client import API_KEY_ENV

    @group.command("serve")
    @click.argument("name")
    @click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
                  help="An env option, e.g. -o dim_room=[6,6] (repeatable; values typed as in configs).")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
    @click.option("--port", type=click.IntRange(0, 65535), default=8100, show_default=True, help="0: a free port.")
    @click.option("--max-sessions", type=click.IntRange(min=1), default=64, show_default=True,
                  help="Most sessions (episodes) at once; one more is refused with OpenEnv's CAPACITY_REACHED.")
    @click.option("--session-timeout", type=click.FloatRange(min=0, min_open=True), default=600.0,
                  show_default=True, help="Seconds a session may sit idle before the server ends it.")
    @click.option("--api-key", default=None, help=f"Require 'Authorization: Bearer KEY' on every route but /health "
                                                  f"[default: ${API_KEY_ENV}, else no key].")
    def serve(name: str, options: tuple[str, ...], host: str, port: int, max_sessions: int,
              session_timeout: float, api_key: str | None) -> None:
        """Serve the ragen env NAME (an env, a variant or a namespace member such as rg.leg_counting) over
        OpenEnv's protocol: sessions on the WebSocket /ws, /schema, /metadata, /health. Train on it from another
        process or machine with `env: remote` (env.options.url=http://HOST:PORT)."""
        _serve(name, env_options(options), host=host, port=port, max_sessions=max_sessions,
               session_timeout=session_timeout, key=api_key or os.environ.get(API_KEY_ENV) or None)


def _serve(name: str, options: dict[str, Any], *, host: str, port: int, max_sessions: int, session_timeout: float,
           key: str | None) -> None:
    import uvicorn

    from ragen_core.log import configure_logging
    from ragen_core.plugins import build_plugin_manager, collect_registries

    from .server import build_app, listen

    configure_logging("auto", "warning")
    envs = collect_registries(build_plugin_manager()).envs
    envs.make(name, options).close()  # a bad name or option fails here, with its error, before anything listens

    def make() -> Any:
        return envs.make(name, options)

    app = build_app(make, name, max_sessions=max_sessions, session_timeout=session_timeout, key=key)
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    where = f"[{host}]" if ":" in host else host
    click.echo(f"serving env {name} at http://{where}:{bound} (OpenEnv protocol: /ws, /schema, /metadata, /health; "
               f"{max_sessions} sessions{', key required' if key else ''})")
    sys.stdout.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="websockets-sansio", lifespan="on"))
    server.run(sockets=[sock])
    click.echo("stopped", err=True)
