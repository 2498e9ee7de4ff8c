"""The ``ragen eval`` command (added through ``ragen_register_commands``); see ``docs/eval.md``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["add_eval_command"]


def add_eval_command(cli: click.Group) -> None:
    """Add ``eval`` to ``cli``."""

    @cli.command("eval", context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1)
    @click.option("--model", "-m", default=None,
                  help="A model folder, tiny, smollm2-135m, a hub id, a training run (its newest checkpoint) or one of "
                       "its checkpoints, or an OpenAI-compatible URL (http://host:port/v1). Without it: the "
                       "trainer's validation of trainer.model, as before.")
    @click.option("--env", "envs", multiple=True, help="Env or variant, repeatable [default: val_envs, else envs].")
    @click.option("--groups", type=click.IntRange(min=1), default=None,
                  help="Groups (initial states) per env [default: rollout.val_env_groups].")
    @click.option("--group-size", type=click.IntRange(min=1), default=None,
                  help="Samples per group, the k of pass@k [default: rollout.val_group_size].")
    @click.option("--temperature", type=click.FloatRange(min=0), default=None,
                  help="Sampling temperature, 0 for greedy [default: rollout.val_temperature].")
    @click.option("--seed", type=int, default=None, help="Group i of each env resets with seed+i [default: "
                                                          "rollout.seed_val].")
    @click.option("--backend", default=None, help="Policy backend (ragen plugins) [default: by the model's URL "
                                                  "scheme: hf for paths and names, openai for http(s)].")
    @click.option("-o", "--option", "backend_options", multiple=True,
                  help="Backend option key=value, repeatable (e.g. device=cuda, api=chat, concurrency=16).")
    @click.option("--batch-groups", type=click.IntRange(min=1), default=8, show_default=True,
                  help="Groups rolled out together, and written, at a time.")
    @click.option("--run-dir", type=click.Path(file_okay=False), default=None,
                  help="Run directory; one holding the same eval is continued.")
    @click.option("--resume", type=click.Path(file_okay=False), default=None,
                  help="Continue the eval in this directory. With a training run (and no --model): validate its "
                       "latest checkpoint with the trainer, in a new folder RUN/evals/NAME-eval-STAMP (the training "
                       "run's files are never written).")
    @click.option("--show-config", is_flag=True,
                  help="Print the resolved config this eval would run (its config.yaml) and exit; loads no model.")
    def eval_cmd(args: tuple[str, ...], model: str | None, resume: str | None, run_dir: str | None,
                 **opts: Any) -> None:
        """Evaluate a model on env variants: ragen eval --model MODEL [CONFIG] [key=value ...].

        Prints success, pass@k and avg@k per env; writes trajectories.jsonl and summary.json to the run directory.
        """
        _eval(args, model, resume, run_dir, opts)


def _eval(args: tuple[str, ...], model: str | None, resume: str | None, run_dir: str | None,
          opts: dict[str, Any]) -> None:
    """``ragen eval``: an eval of ``model`` (or the one in ``resume``) written to the run directory; without a model,
    the trainer's validation (:func:`ragen_core.cli.run_trainer`)."""
    from ragen_core.cli import print_config, run_trainer, split_args
    from ragen_core.runner import execute, start_run

    from .engine import SETTINGS, prepare_eval, run_eval

    show = opts.pop("show_config", False)
    if model is None and not (resume and (Path(resume) / SETTINGS).exists()):
        if any(v not in (None, ()) for k, v in opts.items() if k != "batch_groups"):
            raise click.UsageError("--env, --groups, ... need --model (or --resume of an eval)")
        if show and resume is None:  # the trainer's validation runs the training config
            print_config(args)
            return
        if show:
            raise click.UsageError("--show-config previews a new eval; a resumed run keeps its own config.yaml")
        run_trainer("eval", args, run_dir, resume)
        return
    path, overrides = split_args(args)
    resolved, registries, pm, settings, policy = prepare_eval(
        {**opts, "model": model, "resume": resume, "run_dir": run_dir, "config_path": path,
         "overrides": overrides}, load_policy=not show)
    if show:
        import yaml

        click.echo(yaml.safe_dump(resolved.to_data(), sort_keys=False, allow_unicode=True), nl=False)
        return
    continuing = resume is not None or (run_dir is not None and (Path(run_dir) / SETTINGS).exists())
    run = start_run(resolved, registries, pm, "eval", resume or run_dir, continue_run=continuing)
    (run.run_dir / SETTINGS).write_text(json.dumps(settings, indent=2))
    try:
        result = execute(run, lambda r: run_eval(r, policy, settings))
    except KeyboardInterrupt:
        click.echo(f"ragen: eval interrupted; the finished groups are in {run.run_dir}; continue with: "
                   f"ragen eval --resume {run.run_dir}", err=True)
        sys.exit(130)
    _print_result(settings, result, run.run_dir)


def _print_result(settings: dict[str, Any], result: dict[str, Any], run_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    k = settings["group_size"]
    keys = tuple(dict.fromkeys(("groups", "trajectories", "success", "pass@1", f"pass@{k}", f"avg@{k}", "reward_mean",
                                "env_errors")))
    table = Table(title=f"ragen eval {settings['model']} ({settings['backend']}, temperature "
                        f"{settings['temperature']:g})")
    for col in ("env", *keys):
        table.add_column(col, justify="left" if col == "env" else "right")
    for env, m in result["variants"].items():
        table.add_row(env, *(("-" if key not in m else f"{m[key]:.0f}" if key in ("groups", "trajectories", "env_errors")
                              else f"{m[key]:.3f}") for key in keys))
    Console(width=120).print(table)
    click.echo(f"run: {run_dir}  trajectories: {result['trajectories']}")
