"""The ``ragen`` command line.

Built-in commands: ``plugins``, ``envs``, ``config show``, ``play``, ``rollout``, ``train`` and ``eval`` (the trainer's
validation, unless a plugin provides ``eval``: ``ragen_plugins_eval`` does); plugins add more through
``ragen_register_commands``. Errors from bad input (config, plugins, unknown names) print as one line
plus a hint, never a traceback; the exit status is 2 for a bad config and 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ragen_core import __version__
from ragen_core.errors import ConfigError, PluginLoadError, RagenError

__all__ = ["build_cli", "main", "run_trainer", "split_args"]


class _Group(click.Group):
    """A click group that prints ragen errors as one clear message, and lists its commands with their whole first
    sentence (click cuts it to the terminal width with "...")."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RagenError as exc:
            click.echo(f"ragen: error: {exc}", err=True)
            ctx.exit(2 if isinstance(exc, ConfigError) else 1)


def split_args(args: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """Separate an optional config path from ``key=value`` overrides. A word that starts with ``-`` and names no file
    is an unknown option: click's "No such option" (exit 2), with the command's close options as suggestions."""
    path = None
    overrides = []
    for a in args:
        if a.startswith("-") and not Path(a).exists():
            import difflib

            ctx = click.get_current_context(silent=True)
            known = [o for p in (ctx.command.params if ctx else []) for o in getattr(p, "opts", ()) if o[:1] == "-"]
            name = a.split("=", 1)[0]
            raise click.NoSuchOption(name, possibilities=difflib.get_close_matches(name, known, n=3, cutoff=0.5),
                                     ctx=ctx)
        if "=" in a and not Path(a).exists():
            overrides.append(a)
        elif path is None:
            path = a
        else:
            raise ConfigError(f"two config files given ({path!r} and {a!r})", hint="overrides look like key=value")
    return path, overrides


def load_command_config(path: str | None, overrides: list[str]) -> tuple[Any, Any, Any]:
    """``(config, pm, registries)`` a command runs: the config file under the overrides; without a file, the embedded
    preset of the trainer the overrides name (or the default trainer) under them, as ``ragen train`` runs it."""
    from ragen_core.config import load_config
    from ragen_core.plugins import build_plugin_manager, collect_registries

    config = load_config(path, overrides)
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    if path is None:
        name = config.trainer.name
        try:
            spec = registries.trainers.get(name) if name else registries.trainers.default()
        except RagenError:
            spec = None  # no preset to read: resolution reports the missing trainer
        if spec is not None and getattr(spec, "preset", None):
            # the trainer's embedded default: its values are defaults (env hints replace them), the overrides explicit
            config = load_config(None, overrides, preset=spec.preset_path())
            pm = build_plugin_manager(config)
            registries = collect_registries(pm)
    return config, pm, registries


def _setup(args: tuple[str, ...], *, strict: bool = True) -> tuple[Any, Any, Any]:
    from ragen_core.config import resolve_config
    from ragen_core.log import configure_logging

    config, pm, registries = load_command_config(*split_args(args))
    configure_logging(config.run.log_format, config.run.log_level)
    resolved = resolve_config(config, registries, pm, strict=strict)
    return resolved, registries, pm


def _env_registries() -> tuple[Any, Any]:
    from ragen_core.plugins import build_plugin_manager, collect_registries

    pm = build_plugin_manager()
    return pm, collect_registries(pm)


def build_cli(pm: Any = None) -> click.Group:
    """The root command group, with plugin commands added from ``pm`` (when given)."""

    @click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="ragen")
    def cli() -> None:
        """ragen: train multi-turn reasoning agents with RL (StarPO), through plugins."""

    _add_listing_commands(cli)
    _add_config_commands(cli)
    _add_env_commands(cli)
    _add_trainer_command(cli, "train")
    if pm is not None:
        pm.hook.ragen_register_commands(cli=cli)
    if "eval" not in cli.commands:  # the trainer's validation, unless a plugin (ragen_plugins_eval) provides eval
        _add_trainer_command(cli, "eval")
    return cli


def _add_listing_commands(cli: click.Group) -> None:
    """``ragen plugins`` and ``ragen envs``."""

    @cli.command("plugins")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def plugins_cmd(as_json: bool) -> None:
        """List plugins: distribution, version, hooks and components."""
        from ragen_core.plugins import plugin_infos

        pm_, registries = _env_registries()
        infos = plugin_infos(pm_, registries)
        if as_json:
            click.echo(json.dumps(infos, indent=2))
            return
        rows = [(p["name"], f"{p['distribution']} {p['version']}".strip() or "-", p["status"],
                 "\n".join(p["hooks"]) or "-", ", ".join(f"{c['kind']}:{c['name']}" for c in p["components"]) or "-")
                for p in infos]
        _print_table("ragen plugins", ("plugin", "distribution", "status", "hooks", "components"), rows)

    @cli.command("envs")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @click.option("--long", "long", is_flag=True, help="Each env's rules, actions, rewards and success.")
    @click.option("--members", "members", metavar="NAMESPACE",
                  help="List the env names of one namespace (e.g. rg: rg.leg_counting, ...).")
    def envs_cmd(as_json: bool, long: bool, members: str | None) -> None:
        """List environments, env variants and env namespaces (the envs of another hub: ``PREFIX.<name>``)."""
        _pm, registries = _env_registries()
        if members is not None:
            space = registries.envs.namespace(members)
            names = [f"{space.name}.{m}" for m in space.members()]
            click.echo(json.dumps(names, indent=2) if as_json else "\n".join(names))
            return
        items = [spec.describe() for spec in registries.envs] + [s.describe() for s in registries.envs.namespaces()]
        _print_envs(items, as_json=as_json, long=long)


def _add_config_commands(cli: click.Group) -> None:
    """``ragen config show``."""

    @cli.group("config", cls=_Group)
    def config_grp() -> None:
        """Inspect configuration."""

    @config_grp.command("show", context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1)
    @click.option("--command", type=click.Choice(["train", "rollout", "eval"]), default="train", show_default=True,
                  help="The command whose run config to preview; with eval, ARGS are ragen eval's (-m, --env, ...).")
    def config_show(args: tuple[str, ...], command: str) -> None:
        """Print the resolved config (every default filled in) that `ragen COMMAND [CONFIG] [key=value ...]` would
        run, as its run directory's config.yaml holds it."""
        ctx = click.get_current_context().find_root()
        found = ctx.command.get_command(ctx, "eval") if isinstance(ctx.command, click.Group) else None
        if command == "eval" and found is not None and any("--show-config" in p.opts for p in found.params):
            # the eval plugin's command resolves its own flags (-m, --env, ...): ask it, loading no model
            found.main([*args, "--show-config"], prog_name="ragen eval", standalone_mode=False)
            return
        print_config(args)  # the core's `ragen eval` validates the trainer's model with the training config


def print_config(args: tuple[str, ...]) -> None:
    """Print the resolved config of ``[CONFIG] [key=value ...]`` (the default trainer's preset without a file),
    after comments naming what was not resolved and which keys were derived."""
    import yaml

    resolved, _r, _pm = _setup(args, strict=False)
    for problem in resolved.problems:
        click.echo(f"# not resolved: {problem}")
    for key, source in resolved.derived.items():
        click.echo(f"# {key}: from {source} (not set in the config)")
    click.echo(yaml.safe_dump(resolved.to_data(), sort_keys=False, allow_unicode=True), nl=False)


def _add_env_commands(cli: click.Group) -> None:
    """``ragen play`` and ``ragen rollout``: an env by hand, and the rollout loop with a scripted policy."""

    @cli.command("play", context_settings={"ignore_unknown_options": True})
    @click.argument("env")
    @click.argument("options", nargs=-1)
    @click.option("--seed", type=int, default=0, show_default=True, help="Reset seed.")
    def play_cmd(env: str, options: tuple[str, ...], seed: int) -> None:
        """Play ENV in the terminal (options as key=value, e.g. dim_room=[8,8])."""
        from ragen_core.overrides import parse_override

        opts: dict[str, Any] = {}
        for text in options:
            keys, value = parse_override(text)
            if len(keys) != 1:
                raise ConfigError(f"env option {text!r} must be a plain key=value")
            opts[keys[0]] = value
        _pm, registries = _env_registries()
        _play(registries.envs.make(env, opts), seed)

    @cli.command("rollout", context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1)
    @click.option("--policy", type=click.Choice(["random", "oracle"]), default="random", show_default=True,
                  help="random: a uniformly random valid action each turn; oracle: the env's scripted solver.")
    @click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True,
                  help="Rollout steps (each one batch of env groups).")
    @click.option("--run-dir", type=click.Path(file_okay=False), default=None, help="Run directory.")
    def rollout_cmd(args: tuple[str, ...], policy: str, steps: int, run_dir: str | None) -> None:
        """Roll out env groups with a scripted policy (no model): ragen rollout [CONFIG] [key=value ...]."""
        from ragen_core.runner import execute, run_scripted, start_run

        resolved, registries, pm_ = _setup(args, strict=False)
        run = start_run(resolved, registries, pm_, "rollout", run_dir)
        result = execute(run, lambda r: run_scripted(r, policy=policy, steps=steps))
        _print_summary(run.run_dir, result)


def _add_trainer_command(cli: click.Group, mode: str) -> None:
    @cli.command(mode, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1)
    @click.option("--run-dir", type=click.Path(file_okay=False), default=None, help="Run directory.")
    @click.option("--resume", type=click.Path(file_okay=False), default=None,
                  help="Continue the run in this directory from its latest checkpoint.")
    @click.option("--replay", type=click.Path(file_okay=False), default=None, hidden=mode != "train",
                  help="Train on the rollouts this run directory recorded (trainer.record_rollouts) instead of "
                       "sampling; its config, with any overrides.")
    def command(args: tuple[str, ...], run_dir: str | None, resume: str | None, replay: str | None) -> None:
        run_trainer(mode, args, run_dir, resume, replay)

    example = f"ragen {mode} env=sokoban " + ("trainer.steps=50" if mode == "train" else "rollout.val_env_groups=16")
    command.__doc__ = (f"{'Train' if mode == 'train' else 'Evaluate'} with the trainer named in config: "
                       f"ragen {mode} [CONFIG] [key=value ...]. Without CONFIG, the trainer's embedded preset.\n\n"
                       "Each key=value sets one config key (a dotted path; the value is YAML) over CONFIG or the "
                       f"preset, e.g.:\n\n\b\n  {example}\n  ragen {mode} \"envs=[{{name: sokoban, groups: 4}}]\" "
                       "rollout.max_turn=3\n\n"
                       f"ragen config show [CONFIG] [key=value ...] prints every key with the value it resolves to.")
    command.help = command.__doc__


def run_trainer(mode: str, args: tuple[str, ...], run_dir: str | Path | None = None, resume: str | None = None,
                replay: str | None = None) -> None:
    """``train(run)`` (mode ``train``) or ``evaluate(run)`` (``eval``) of the trainer named in the config, in a new run
    directory or continuing ``resume`` from its latest checkpoint, sampling or replaying the rollouts recorded in
    ``replay``; prints the summary."""
    from ragen_core.config import resolve_config
    from ragen_core.log import configure_logging
    from ragen_core.plugins import load_component_class
    from ragen_core.runner import execute, new_run_dir, start_run

    path, overrides = split_args(args)
    checkpoint = None
    if resume is not None:
        checkpoint = _latest_checkpoint(Path(resume))
        path = path or str(Path(resume) / "config.yaml")
        if mode == "train":  # training continues in its own directory; an eval of it gets one of its own
            run_dir = resume
    if replay is not None:
        if not (Path(replay) / "rollouts").is_dir():
            raise RagenError(f"cannot replay: {replay!r} holds no recorded rollouts (no rollouts/ folder)",
                             hint="record a run with trainer.record_rollouts=true")
        path = path or str(Path(replay) / "config.yaml")
    config, pm, registries = load_command_config(path, overrides)
    if not len(registries.trainers):
        raise RagenError(f"cannot {mode}: no trainer is installed",
                         hint="install a trainer plugin, e.g. pip install 'ragen[torch]' (native) or 'ragen[verl]'")
    configure_logging(config.run.log_format, config.run.log_level)
    resolved = resolve_config(config, registries, pm, strict=True)
    config = resolved.config
    trainer = load_component_class(registries.trainers.get(config.trainer.name))(resolved.trainer)
    if replay is not None:
        if not getattr(trainer, "supports_replay", False):
            raise ConfigError(f"trainer {config.trainer.name!r} cannot replay recorded rollouts")
        if hasattr(trainer, "check_replay"):  # before any model is loaded: a replay past the recording is refused
            trainer.check_replay(Path(replay))
    if mode == "eval" and resume is not None and run_dir is None:
        run_dir = new_run_dir(Path(resume) / "evals", config.run.name, "eval")  # never the training run's files
    run = start_run(resolved, registries, pm, mode, run_dir, continue_run=mode == "train" and resume is not None)
    if replay is not None:
        run.state["replay_dir"] = str(replay)
    if checkpoint is not None:
        run.state["resume_checkpoint"] = str(checkpoint)
    result = execute(run, getattr(trainer, "train" if mode == "train" else "evaluate"))
    _print_summary(run.run_dir, result)


def _latest_checkpoint(run_dir: Path) -> Path:
    """The newest ``checkpoints/step_N`` of a run directory (the checkpoint layout every trainer uses)."""
    if not (run_dir / "config.yaml").exists():
        raise RagenError(f"cannot resume: {str(run_dir)!r} is not a run directory (no config.yaml)")
    # complete ones only: the native trainer's state.json or the veRL plugin's verl.json is written last
    steps = sorted(p for p in (run_dir / "checkpoints").glob("step_*")
                   if (p / "state.json").is_file() or (p / "verl.json").is_file())
    if not steps:
        raise RagenError(f"cannot resume: {str(run_dir)!r} has no checkpoint under checkpoints/")
    return steps[-1]


def _print_envs(items: list[dict[str, Any]], *, as_json: bool, long: bool) -> None:
    """``ragen envs``: a table, JSON, or (``--long``) each env's name and catalogue guide."""
    from ragen_core.registry import GUIDE_KEYS

    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    for it in items if long else ():
        click.echo(f"{it['name']} ({it['kind']}, plugin {it['plugin']}): {it['description']}")
        for key in [k for k in GUIDE_KEYS if k in it.get("guide", {})]:
            click.echo(click.wrap_text(it["guide"][key], initial_indent=f"  {key}: ", subsequent_indent="    ",
                                       width=100))
    if long:
        return
    rows = [(it["name"], it["kind"], (it.get("env", "") + (f" {json.dumps(it['params'])}" if it.get("params") else "")
                                      + (f" ({it['option']}=<name>)" if it.get("option") else "")) or "-",
             it["plugin"], it["description"]) for it in items]
    _print_table("ragen envs", ("name", "kind", "base", "plugin", "description"), rows)


def _print_table(title: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def _print_summary(run_dir: Path, result: dict[str, Any]) -> None:
    metrics = result.get("metrics", {})
    click.echo(f"run: {run_dir}  status: {result.get('status')}  steps: {result.get('steps')}")
    for key in sorted(metrics):
        if key.count("/") <= 2 and not key.startswith("timing"):
            click.echo(f"  {key:40s} {metrics[key]:.4f}")


def _play(env: Any, seed: int) -> None:
    """Interactive loop: show the state, read an action, show reward and done."""
    obs, _info = env.reset(seed=seed)
    click.echo(click.style("Instruction: ", bold=True) + env.instruction)
    if env.legend:
        click.echo("Legend: " + ", ".join(f"{k} = {v}" for k, v in env.legend.items()))
    names = env.action_names
    click.echo("Actions: " + (", ".join(names) if names else "free text") + "   (q to quit)")
    budget = int(env.max_actions_per_traj)
    total = 0.0
    used = 0
    while True:
        click.echo(f"\nState:\n{obs}")
        try:
            action = input(f"action [{budget - used} left]> ")
        except EOFError:
            click.echo("\n(end of input)")
            return
        if action.strip().lower() in {"q", "quit", "exit"}:
            return
        obs, reward, terminated, truncated, info = env.step(action)
        used += 1
        total += float(reward)
        flags = "valid" if info.get("action_is_valid") else "invalid"
        click.echo(f"reward {float(reward):+.3f} (total {total:+.3f}), {flags}")
        if terminated or truncated or used >= budget:
            click.echo(f"\nState:\n{obs}")
            outcome = "success" if info.get("success") else ("out of actions" if used >= budget else "failed")
            click.echo(click.style(f"Episode over: {outcome}, total reward {total:+.3f}", bold=True))
            return


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``ragen`` script."""
    from ragen_core.log import configure_logging
    from ragen_core.plugins import build_plugin_manager

    configure_logging("auto", "warning")
    try:
        pm = build_plugin_manager()
    except PluginLoadError as exc:
        click.echo(f"ragen: error: {exc}", err=True)
        sys.exit(1)
    build_cli(pm).main(args=argv, prog_name="ragen")


if __name__ == "__main__":  # pragma: no cover
    main()
