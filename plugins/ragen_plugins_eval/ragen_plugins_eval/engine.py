"""The standalone evaluation behind ``ragen eval --model MODEL``: a policy backend on env variants, groups × group size,
with success, pass@k and avg@k.

The policy comes from a backend registered through ``ragen_register_policies`` (a local Hugging Face model from the
torch plugin, an OpenAI-compatible HTTP endpoint from this plugin, or a third party's), chosen by ``--backend`` or by
the model's URL scheme. Episodes run through the training rollout loop (:func:`~ragen_core.starpo.rollout.make_episodes` and
:func:`~ragen_core.starpo.rollout.run_lockstep`); group ``i`` of every env resets with ``seed + i``.

A run directory holds ``eval.json`` (the settings), ``trajectories.jsonl`` (one line per trajectory, appended a batch
of whole groups at a time), ``config.yaml``, ``plugins.json`` and ``summary.json``. Evaluating into a directory that
already holds the same eval (or ``--resume DIR``) skips the groups already written, so an interrupted eval resumes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from ragen_core.config import load_config, resolve_config, unstructure
from ragen_core.errors import ConfigError, RagenError
from ragen_core.overrides import parse_override
from ragen_core.starpo.chat import ChatCodec, system_message, user_message
from ragen_core.starpo.rollout import make_episodes, run_lockstep

__all__ = ["eval_metrics", "pass_at_k", "prepare_eval", "progress_note", "read_trajectories", "run_eval",
           "success_tally", "trajectory_record"]

SETTINGS, TRAJECTORIES = "eval.json", "trajectories.jsonl"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of a group of ``n`` samples with ``c`` successes (Chen et al., 2021): the chance that ``k``
    samples drawn without replacement hold a success, ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def eval_metrics(records: list[dict[str, Any]], group_size: int) -> dict[str, dict[str, float]]:
    """Metrics per env and over ``all``: success (per trajectory), pass@k for k = 1, 2, 4, ... and the group size
    (over groups with at least k trajectories without env errors), avg@K (mean of the groups' success rates),
    ``reward_mean`` (the trajectory score: env rewards plus format penalties, what ``rollout/reward_mean`` reports
    in training), ``env_reward_mean`` (env rewards only), turns, tokens, ``truncated_rate`` (the share of turns
    that hit ``max_new_tokens`` before ``</answer>``, as ``rollout/truncated_rate``) and env errors."""
    ks = sorted({2 ** i for i in range(group_size.bit_length()) if 2 ** i < group_size} | {group_size})
    by_env: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_env.setdefault(r["env"], []).append(r)
    out = {}
    for name, recs in [*sorted(by_env.items()), ("all", records)]:
        ok = [r for r in recs if r["env_error"] is None]
        groups: dict[tuple[str, int], list[bool]] = {}
        for r in ok:
            groups.setdefault((r["env"], r["seed"]), []).append(bool(r["success"]))
        m = {"groups": float(len(groups)), "trajectories": float(len(ok)), "env_errors": float(len(recs) - len(ok))}
        if ok:
            m["success"] = sum(r["success"] for r in ok) / len(ok)
            m[f"avg@{group_size}"] = sum(sum(g) / len(g) for g in groups.values()) / len(groups)
            for k in ks:
                vals = [pass_at_k(len(g), sum(g), k) for g in groups.values() if len(g) >= k]
                if vals:
                    m[f"pass@{k}"] = sum(vals) / len(vals)
            # reward_mean is the trajectory score (env rewards plus format penalties), as rollout/reward_mean
            for metric, key in (("reward_mean", "score"), ("env_reward_mean", "reward"), ("turns_mean", "turns"),
                                ("response_tokens_mean", "response_tokens")):
                m[metric] = sum(r[key] for r in ok) / len(ok)
            turns = [t for r in ok for t in r.get("turn_details", [])]
            if turns:  # as rollout/truncated_rate: the share of turns cut by max_new_tokens before </answer>
                m["truncated_rate"] = sum(bool(t.get("truncated", False)) for t in turns) / len(turns)
        out[name] = m
    return out


def trajectory_record(traj: Any, env: Any, codec: ChatCodec, rollout: Any) -> dict[str, Any]:
    """One JSONL line: env, group, seed, outcome, token counts, the chat messages and each turn's details.

    The messages are the logical conversation (system, then user and assistant per turn, the assistant content
    being the opening tag plus the sampled text), whatever the context mode showed the model."""
    messages: list[dict[str, str]] = []
    if traj.turns:
        messages.append({"role": "system", "content": system_message(
            env, max_actions_per_turn=rollout.max_actions_per_turn, action_sep=rollout.action_sep)})
        budget, reward, invalid = int(env.max_actions_per_traj), None, False
        eos = getattr(codec.tokenizer, "eos_token", None)
        for n, turn in enumerate(traj.turns, 1):
            text = turn.response_text[:-len(eos)] if eos and turn.response_text.endswith(eos) else turn.response_text
            messages += [{"role": "user", "content": user_message(
                n, turn.observation, budget, max_new_tokens=rollout.max_new_tokens, think=rollout.think,
                previous_reward=reward, previous_invalid=invalid)},
                {"role": "assistant", "content": codec.open_tag + text}]
            budget, reward, invalid = budget - len(turn.actions), turn.reward, not turn.actions
    return {"env": traj.env, "group_id": traj.group_id, "seed": traj.seed, "episode_id": traj.episode_id,
            "success": bool(traj.success), "reward": traj.total_reward, "score": traj.score, "turns": len(traj.turns),
            "prompt_tokens": sum(len(t.prompt_ids) for t in traj.turns), "response_tokens": traj.response_length,
            "context_truncations": traj.context_truncations, "env_error": traj.env_error, "messages": messages,
            "turn_details": [{"actions": t.actions, "reward": t.reward, "format_penalty": t.format_penalty,
                              "prompt_tokens": len(t.prompt_ids), "response_tokens": len(t.response_ids),
                              "truncated": t.truncated, "info": t.info} for t in traj.turns]}


def read_trajectories(path: Path, group_size: int) -> list[dict[str, Any]]:
    """The records of the complete groups in ``path``; a torn last line or an incomplete group (an interrupted
    write) is removed from the file."""
    if not path.exists():
        return []
    records: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for line in lines:
        try:
            record = json.loads(line) if line.endswith("\n") else None
        except json.JSONDecodeError:
            record = None
        if record is None:
            break
        records.append(record)
    count: dict[tuple[str, int], int] = {}
    for r in records:
        count[r["env"], r["seed"]] = count.get((r["env"], r["seed"]), 0) + 1
    keep = [count[r["env"], r["seed"]] == group_size for r in records]
    if sum(keep) != len(lines):
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line for line, k in zip(lines, keep) if k), encoding="utf-8")
        os.replace(tmp, path)
    return [r for r, k in zip(records, keep) if k]


def success_tally(records: list[dict[str, Any]], tally: dict[str, tuple[int, int]] | None = None,
                  ) -> dict[str, tuple[int, int]]:
    """``tally`` (default: a new one) updated with ``records``: per env, ``(successes, trajectories)`` over the
    trajectories without env errors, the population ``eval/ENV/success`` is computed over."""
    tally = {} if tally is None else tally
    for r in records:
        if r["env_error"] is None:
            wins, n = tally.get(r["env"], (0, 0))
            tally[r["env"]] = (wins + bool(r["success"]), n + 1)
    return tally


def progress_note(tally: dict[str, tuple[int, int]]) -> str:
    """The progress bar's note: each env's success rate over all its groups finished so far (a resumed eval's
    included), e.g. ``(success so far: frozenlake 0.40 · sokoban 0.12)``; "" before any finished."""
    rates = [f"{env} {wins / n:.2f}" for env, (wins, n) in sorted(tally.items()) if n]
    return f"(success so far: {' · '.join(rates)})" if rates else ""


def _json_default(obj: Any) -> Any:
    return obj.item() if hasattr(obj, "item") else str(obj)


def run_eval(run: Any, policy: Any, settings: dict[str, Any], *, progress: bool = True) -> dict[str, Any]:
    """Roll out every group of ``settings`` not yet in ``trajectories.jsonl``, ``batch_groups`` groups at a time
    (a policy with a ``seed(n)`` method is seeded before each batch), appending each batch's trajectories; write the
    metrics of all groups in the file to ``metrics.jsonl`` (step 0, ``eval/ENV/NAME``) and return the summary."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

    from ragen_core.log import progress as progress_display

    rollout, k, path = run.config.rollout, settings["group_size"], Path(run.run_dir) / TRAJECTORIES
    codec = ChatCodec(policy.tokenizer, think=rollout.think)
    groups = [(name, options, settings["seed"] + i) for name, options in settings["envs"]
              for i in range(settings["groups"])]
    finished = read_trajectories(path, k)
    done, tally = {(r["env"], r["seed"]) for r in finished}, success_tally(finished)
    del finished  # whole conversations: keep only what resuming and the bar need
    size = settings["batch_groups"]
    columns = [TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TextColumn("groups {task.fields[note]}"),
               TimeRemainingColumn()]
    with progress_display(*columns, enabled=progress) as bar:
        task = bar.add_task("eval", total=len(groups), completed=len(done), note=progress_note(tally))
        for start in range(0, len(groups), size):
            todo = [(start + j, (name, opts, seed)) for j, (name, opts, seed) in enumerate(groups[start:start + size])
                    if (name, seed) not in done]
            if not todo:
                continue
            if callable(getattr(policy, "seed", None)):
                policy.seed(settings["seed"] * 1_000_003 + start)
            episodes = []
            for gid, (name, options, seed) in todo:
                made = make_episodes(run.registries.envs, [(name, 1, options)], seeds=[seed], group_size=k,
                                     config=rollout, codec=codec, temperature=settings["temperature"],
                                     first_episode_id=gid * k)
                for ep in made:
                    ep.group_id = gid
                episodes += made
            batch = run_lockstep(episodes, policy, env_workers=rollout.env_workers)
            run.begin_step(0, batch)  # an evaluation is one step (0) rolled out in batches
            records = [trajectory_record(t, ep.env, codec, rollout) for t, ep in zip(batch, episodes)]
            lines = [json.dumps(r, default=_json_default) + "\n" for r in records]
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("".join(lines))
                fh.flush()
                os.fsync(fh.fileno())
            done.update((name, seed) for _gid, (name, _opts, seed) in todo)
            rate = sum(t.success for t in batch) / len(batch)
            bar.update(task, completed=len(done), note=progress_note(success_tally(records, tally)))
            run.log.info("eval_batch", groups_done=len(done), groups=len(groups), success=round(rate, 4))
    variants = eval_metrics(read_trajectories(path, k), k)
    metrics = {f"eval/{env}/{key}": v for env, m in variants.items() for key, v in m.items()}
    run.end_step(run.step_context(0), metrics, "eval", max_new_tokens=rollout.max_new_tokens)
    return {"status": "completed", "steps": 0, "variants": variants, "trajectories": str(path), "metrics": metrics,
            "model": settings["model"], "backend": settings["backend"],
            "token_unit": getattr(policy, "token_unit", "token"), "usage": dict(getattr(policy, "usage", {}) or {})}


def _resolve_model(model: str) -> tuple[str, Path | None]:
    """``(model, the training run's config.yaml or None)``; a run directory becomes its newest checkpoint, a
    checkpoint (``RUN/checkpoints/step_N`` or ``RUN/checkpoints/best``) brings its run's config. ``RUN:best`` is an
    error pointing to ``RUN/checkpoints/best``."""
    p = Path(model).expanduser()
    run, sep, name = model.rpartition(":")
    if "://" not in model and sep and name == "best" and not p.exists() and \
            (Path(run).expanduser() / "config.yaml").is_file():
        raise RagenError(f"{model!r} is not a model: the best checkpoint of a run is a folder",
                         hint=f"use -m {str(Path(run) / 'checkpoints' / 'best')!r}")
    if "://" in model or not p.is_dir():
        return model, None
    if (p / "config.yaml").is_file() and not (p / SETTINGS).exists():
        steps = sorted((p / "checkpoints").glob("step_*"))
        if not steps:
            raise RagenError(f"run directory {model!r} has no checkpoint under checkpoints/",
                             hint="pass a checkpoint folder, or train with trainer.save_every > 0")
        return str(steps[-1]), p / "config.yaml"
    run_config = p.parent.parent / "config.yaml"
    return str(p), run_config if p.parent.name == "checkpoints" and run_config.is_file() else None


def _pick_backend(registries: Any, model: str, name: str | None) -> Any:
    if name:
        return registries.policies.get(name)
    scheme = model.split("://", 1)[0].lower() if "://" in model else "path"
    found = [s for s in registries.policies if scheme in s.schemes]
    known = ", ".join(f"{s.name} ({'/'.join(s.schemes)})" for s in registries.policies) or "none installed"
    if len(found) != 1:
        raise RagenError(f"{'no' if not found else 'more than one'} policy backend serves {scheme} models "
                         f"like {model!r}", hint=f"choose one with --backend; backends: {known}")
    return found[0]


def prepare_eval(args: dict[str, Any], *, load_policy: bool = True) -> tuple[Any, Any, Any, dict[str, Any], Any]:
    """Check the command's arguments (``config_path``, ``overrides``, ``model``, ``envs``, ``groups``, ...) and load
    the policy (None without ``load_policy``: ``--show-config``): returns ``(resolved config, registries, plugin
    manager, settings, policy)``. Bad input raises one :class:`RagenError` before anything is written."""
    from ragen_core.log import configure_logging
    from ragen_core.plugins import build_plugin_manager, collect_registries, load_component_class

    resume = args["resume"]
    config, settings = _resumed_settings(args, resume) if resume is not None else _new_settings(args)
    configure_logging(config.run.log_format, config.run.log_level)
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    resolved = resolve_config(config, registries, pm, strict=False)  # config variants; envs and their options
    if resume is None:
        settings["backend"] = _pick_backend(registries, settings["model"], args["backend"]).name
    run_dir = resume or args["run_dir"]
    previous = Path(run_dir) / SETTINGS if run_dir else None
    if previous is not None and previous.exists():
        old = json.loads(previous.read_text())
        diff = sorted(key for key in {**old, **settings} if old.get(key) != settings.get(key))
        if diff:
            raise ConfigError(f"{run_dir} holds an eval with other settings ({', '.join(diff)})",
                              hint="choose another --run-dir, or continue that eval with --resume DIR")
    spec = registries.policies.get(settings["backend"])
    # errors name the option under the backend's name: "unknown config key 'hf.devic'" for -o devic=...
    backend_config = spec.make_config({"model": settings["model"], **settings["backend_options"]})
    policy = load_component_class(spec)(backend_config) if load_policy else None
    return resolved, registries, pm, settings, policy


def _resumed_settings(args: dict[str, Any], resume: str) -> tuple[Any, dict[str, Any]]:
    """The config and settings of the eval in ``resume`` (``--resume``, which takes no other settings)."""
    flags = {"model": "--model", "envs": "--env", "groups": "--groups", "group_size": "--group-size",
             "temperature": "--temperature", "seed": "--seed", "backend": "--backend", "backend_options": "-o",
             "config_path": "CONFIG", "overrides": "key=value overrides"}
    given = [flag for key, flag in flags.items() if args[key] not in (None, (), [])]
    if given:
        raise ConfigError(f"--resume takes the eval's settings from {resume}/{SETTINGS}; drop {', '.join(given)}")
    try:
        settings = json.loads((Path(resume) / SETTINGS).read_text())
    except (OSError, ValueError) as exc:
        raise RagenError(f"cannot resume: {resume!r} holds no readable {SETTINGS} ({exc})") from None
    return load_config(Path(resume) / "config.yaml"), settings


def _new_settings(args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The config and settings of a new eval: the model's (or ``CONFIG``'s) config with the command's envs, groups,
    group size, temperature and seed as its validation settings (``backend`` is picked later)."""
    from ragen_core.config import EnvChoice

    model, run_config = _resolve_model(args["model"])
    config = load_config(args["config_path"] or run_config, args["overrides"])
    ro = config.rollout
    options = {}
    for text in args["backend_options"]:
        keys, value = parse_override(text)
        options[".".join(keys)] = value
    envs = [[e, {}] for e in args["envs"]] or [[c.name, c.options] for c in (config.val_envs or config.envs)]
    if not envs:
        raise ConfigError("nothing to evaluate: no --env given and the config names no env",
                          hint="ragen eval -m MODEL --env NAME (ragen envs lists them), or a CONFIG with env: NAME")
    groups, k = args["groups"] or ro.val_env_groups, args["group_size"] or ro.val_group_size
    temperature = ro.val_temperature if args["temperature"] is None else args["temperature"]
    seed = ro.seed_val if args["seed"] is None else args["seed"]
    ro = attrs.evolve(ro, env_groups=groups * len(envs), val_env_groups=groups * len(envs), val_group_size=k,
                      val_temperature=temperature, seed_val=seed)
    config = attrs.evolve(config, rollout=ro, val_envs=None,
                          envs=[EnvChoice(name=n, groups=groups, options=o) for n, o in envs])
    settings = json.loads(json.dumps({
        "model": model, "backend": None, "backend_options": options, "envs": envs, "groups": groups,
        "group_size": k, "temperature": temperature, "seed": seed, "batch_groups": args["batch_groups"],
        "rollout": unstructure(ro)}))
    return config, settings
