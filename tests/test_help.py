"""Every command's help is complete: each option of every command and subcommand (plugins' included) has help, the
top-level and group listings show each command's whole first sentence (not cut with "..."), and ``train --help``
explains key=value overrides with an example and points to ``ragen config show``."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click
from click.testing import CliRunner

from ragen_core.cli import build_cli
from ragen_core.plugins import build_plugin_manager


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _walk(cmd, (*path, name))


def _squash(text: str) -> str:
    return " ".join(text.split())


def test_every_option_of_every_command_has_help() -> None:
    cli = build_cli(build_plugin_manager())
    commands = dict(_walk(cli))
    assert {"train", "eval", "rollout", "play", "config", "config show", "plugins", "envs"} <= {
        " ".join(p) for p in commands}
    missing = [f"ragen {' '.join(path)} {param.opts[0]}" for path, cmd in commands.items() for param in cmd.params
               if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()]
    assert missing == []
    for path, cmd in commands.items():
        assert (cmd.help or "").strip(), f"ragen {' '.join(path)} has no help"


def test_command_listings_show_each_whole_first_sentence() -> None:
    cli = build_cli(build_plugin_manager())
    groups = [((), cli), *((p, c) for p, c in _walk(cli) if isinstance(c, click.Group))]
    for path, group in groups:
        res = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80)
        assert res.exit_code == 0, res.output
        listing = _squash(res.output.split("Commands:", 1)[1])
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert cmd is not None
            first = cmd.get_short_help_str(limit=sys.maxsize)
            assert first and _squash(first) in listing, (path, name, first)
            assert first.endswith(".") or first.endswith(")"), (name, first)  # a sentence, not a cut


def test_train_help_explains_overrides() -> None:
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["train", "--help"])
    assert res.exit_code == 0
    assert "key=value" in res.output and "ragen train env=sokoban trainer.steps=50" in res.output
    assert "ragen config show" in res.output


def test_serve_ports_differ() -> None:
    cli = build_cli(build_plugin_manager())
    ports = {name: next(p.default for p in cli.commands[name].params if p.name == "port")
             for name in ("serve", "retrieval-serve") if name in cli.commands}
    assert len(set(ports.values())) == len(ports), ports
