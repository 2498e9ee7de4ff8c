"""Rollout overhead: where a rollout step's wall time goes with the native trainer's own rollout path.

Usage: python bench/rollout_overhead.py [--steps 3] [--warm-start-steps N] [--threads N] [--json OUT] [key=value ...]

The torch trainer's embedded preset (``cpu_default.yaml``: since session 13 the tiny model on the 3x3 lake, 16 groups x
8, four turns of one move, 16 new tokens; earlier figures in bench/README.md were measured on the Sokoban and Bandit
presets of their day) is loaded, with ``key=value`` overrides on top. The model gets the preset's format
warm-start first (so it answers in format and the env is really stepped; ``--warm-start-steps 0`` skips it), then
each step does exactly what ``TorchTrainer._rollout`` does: ``make_episodes`` + ``run_lockstep`` with an
``HFPolicy``. Instrumented (wrappers in this process only; nothing in ragen is changed):

- the model: the sampling loop (``ragen_plugins_torch.decoding.decode``, or Hugging Face's ``model.generate`` with
  ``--decoder hf``: forward passes, sampling, the stop check) plus the prefills the policy runs before it (a group's
  shared prompt, the batch's common prefix, the new tokens after a prefix from the store), and inside it the time in
  the model's forward passes (forward hooks, and the native loop's in-place steps);
- the policy wrapper: ``HFPolicy.generate`` minus the model (left padding, the store's lookups and bookkeeping,
  log-probs and entropies from the sampled logits);
- env: ``make_episodes`` (env construction) and every ``reset`` / ``step`` / ``state_key`` call;
- prompt building, parsing and tokenisation: ``system_message``, ``user_message``, the chat codec's ``prompt`` and
  ``continuation`` (template rendering + encoding) and ``read_response`` (decoding and parsing the answer);
- the driver: the rest of the wall time (the core loop: generators, batching requests, bookkeeping).

"Outside the model" is everything but the model (StarPO target: <= 5% of rollout wall time; issue #18's: <= 3%). The
trainer's own metric (``timing_s/env`` / rollout time) counts the policy wrapper as model time; both are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from _machine import machine  # noqa: E402  (bench/_machine.py)


class Timers:
    """Accumulated seconds per category; ``exclusive`` categories do not count calls nested in another one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.active: str | None = None
        self.in_policy = False

    def add(self, key: str, dt: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + dt
        self.calls[key] = self.calls.get(key, 0) + 1

    def exclusive(self, key: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.active is not None or self.in_policy:  # nested (e.g. decode inside the policy): counted there
                return fn(*args, **kwargs)
            self.active = key
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(key, time.perf_counter() - t0)
                self.active = None

        return wrapped


class TimedPolicy:
    """The policy as the rollout loop sees it, timing ``generate`` as a whole."""

    def __init__(self, policy: Any, timers: Timers) -> None:
        self.policy, self.tokenizer, self.timers = policy, policy.tokenizer, timers
        self.requests = 0

    def generate(self, requests: list[Any]) -> list[Any]:
        self.requests += len(requests)
        self.timers.in_policy = True
        t0 = time.perf_counter()
        try:
            return self.policy.generate(requests)
        finally:
            self.timers.add("policy.generate", time.perf_counter() - t0)
            self.timers.in_policy = False


def instrument_model(model: Any, timers: Timers) -> None:
    """Time the sampling loop (the native loop, ``ragen_plugins_torch.decoding.decode``, or transformers'
    ``model.generate`` for ``--decoder hf``) and every forward pass: those inside the loop, and the prefills the
    policy runs before it (a group's shared prompt, the batch's common prefix, a prompt's new tokens after the
    store's cached prefix). A step of the native loop's in-place path (``ragen_plugins_torch.decode_step``) counts as
    a forward pass: it runs the model's modules without its ``forward``. Model time = the loop + the prefills
    (instance-level wrappers and hooks; the module attribute for the native loop, which the policy looks up at each
    call, and the in-place step's class attribute)."""
    from ragen_plugins_torch import decode_step, decoding

    state = {"t": 0.0, "in_loop": False}

    def timed(fn: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            state["in_loop"] = True
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timers.add("model.generate", time.perf_counter() - t0)
                state["in_loop"] = False

        return run

    def pre(_module: Any, _args: Any) -> None:
        state["t"] = time.perf_counter()

    def post(_module: Any, _args: Any, _out: Any) -> None:
        dt = time.perf_counter() - state["t"]
        timers.add("model.forward", dt)
        if not state["in_loop"]:
            timers.add("model.prefill", dt)

    def timed_step(fn: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            pre(None, None)
            try:
                return fn(self, *args, **kwargs)
            finally:
                post(None, None, None)

        return run

    model.generate = timed(model.generate)
    decoding.decode = timed(decoding.decode)
    decode_step.DecodeStep.step = timed_step(decode_step.DecodeStep.step)  # type: ignore[method-assign]
    model.register_forward_pre_hook(pre)
    model.register_forward_hook(post)


def instrument_rollout_module(timers: Timers) -> None:
    """Prompt building and parsing functions the episode calls through ``ragen_core.starpo.rollout``'s namespace."""
    from ragen_core.starpo import rollout

    for name in ("system_message", "user_message", "_summary"):
        setattr(rollout, name, timers.exclusive("prompt", getattr(rollout, name)))


def instrument_codec(codec: Any, timers: Timers) -> None:
    for name in ("prompt", "continuation", "read_response"):
        setattr(codec, name, timers.exclusive("prompt", getattr(codec, name)))
    codec.tokenizer.decode = timers.exclusive("prompt", codec.tokenizer.decode)


def instrument_envs(episodes: list[Any], timers: Timers) -> None:
    for ep in episodes:
        env = ep.env
        for name in ("reset", "step", "state_key"):
            if callable(getattr(env, name, None)):
                setattr(env, name, timers.exclusive("env", getattr(env, name)))


def load_preset(overrides: list[str]) -> tuple[Any, Any]:
    """The torch trainer's embedded preset with ``overrides``, resolved; returns (resolved config, registries)."""
    from ragen_core.config import load_config, resolve_config
    from ragen_core.plugins import build_plugin_manager, collect_registries

    registries = collect_registries(build_plugin_manager())
    config = load_config(registries.trainers.get("torch").preset_path(), overrides)
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    return resolve_config(config, registries, pm, strict=True), registries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="rollout steps measured (default 3)")
    parser.add_argument("--warm-start-steps", type=int, default=None,
                        help="format warm-start steps before measuring (default: the preset's)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, the core count)")
    parser.add_argument("--decoder", choices=["native", "hf"], default="native",
                        help="the policy's sampler: the native loop (default) or transformers' generate")
    parser.add_argument("--json", default="bench/results/rollout_overhead.json")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. rollout.env_groups=4")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from ragen_core.runner import group_seeds
    from ragen_core.starpo.chat import ChatCodec
    from ragen_core.starpo.rollout import make_episodes, run_lockstep
    from ragen_plugins_torch.models import load_model_and_tokenizer
    from ragen_plugins_torch.policy import HFPolicy
    from ragen_plugins_torch.sft import demonstration_samples, warm_start

    load_at_start = list(os.getloadavg())
    resolved, registries = load_preset(args.overrides)
    cfg, tc = resolved.config, resolved.trainer
    ro = cfg.rollout
    torch.manual_seed(cfg.run.seed)
    model, tokenizer = load_model_and_tokenizer(tc.model, dtype=torch.float32, device="cpu")
    policy = HFPolicy(model, tokenizer, device="cpu", generation_batch=tc.generation_batch, decoder=args.decoder,
                      share_prompts=tc.share_prompts, prefix_cache_mb=tc.prefix_cache_mb)
    codec = ChatCodec(tokenizer, think=ro.think)
    ws_steps = tc.warm_start_steps if args.warm_start_steps is None else args.warm_start_steps
    ws_seconds = 0.0
    if ws_steps:
        t0 = time.perf_counter()
        samples = demonstration_samples(registries, resolved.env_plan, codec, ro, groups=tc.warm_start_groups,
                                        seed=cfg.run.seed)
        warm_start(policy, samples, steps=ws_steps, lr=tc.warm_start_lr, batch_size=tc.warm_start_batch,
                   seed=cfg.run.seed)
        ws_seconds = time.perf_counter() - t0

    timers = Timers()
    instrument_model(model, timers)
    instrument_rollout_module(timers)
    instrument_codec(codec, timers)
    steps: list[dict[str, Any]] = []
    for step in range(1, args.steps + 1):
        before = dict(timers.seconds)
        tokens_before = policy.generated_tokens
        torch.manual_seed(cfg.run.seed * 1_000_003 + step)
        seeds = group_seeds(ro.seed_train, (step - 1) * ro.env_groups, ro.env_groups)
        t0 = time.perf_counter()
        episodes = make_episodes(registries.envs, resolved.env_plan, seeds=seeds, group_size=ro.group_size,
                                 config=ro, codec=codec, temperature=ro.temperature)
        t_make = time.perf_counter() - t0
        instrument_envs(episodes, timers)
        timed = TimedPolicy(policy, timers)
        batch = run_lockstep(episodes, timed, env_workers=ro.env_workers)
        wall = time.perf_counter() - t0
        d = {k: v - before.get(k, 0.0) for k, v in timers.seconds.items()}
        turns = [t for traj in batch for t in traj.turns]
        row = {
            "wall_s": wall,
            "model_generate_s": d.get("model.generate", 0.0) + d.get("model.prefill", 0.0),
            "model_forward_s": d.get("model.forward", 0.0),
            "model_prefill_s": d.get("model.prefill", 0.0),
            "policy_wrapper_s": d.get("policy.generate", 0.0) - d.get("model.generate", 0.0)
            - d.get("model.prefill", 0.0),
            "env_construction_s": t_make,
            "env_calls_s": d.get("env", 0.0),
            "prompt_parse_tokenise_s": d.get("prompt", 0.0),
            "trajectories": len(batch),
            "turns": len(turns),
            "env_steps": sum(len(t.actions) for t in turns),
            "generated_tokens": policy.generated_tokens - tokens_before,
            "success": sum(t.success for t in batch) / max(len(batch), 1),
        }
        row["driver_s"] = wall - (row["model_generate_s"] + row["policy_wrapper_s"] + t_make + row["env_calls_s"]
                                  + row["prompt_parse_tokenise_s"])
        steps.append(row)

    total = {k: sum(r[k] for r in steps) for k in steps[0]}
    wall = total["wall_s"]
    parts = [
        ("model: sampling loop + prefills", "model_generate_s"),
        ("  of which model forward passes", "model_forward_s"),
        ("  of which prefills (before the loop)", "model_prefill_s"),
        ("policy wrapper (pad, log-probs, stop scan)", "policy_wrapper_s"),
        ("env construction (make_episodes)", "env_construction_s"),
        ("env reset / step / state_key", "env_calls_s"),
        ("prompt build, parse, tokenise", "prompt_parse_tokenise_s"),
        ("driver (core loop, bookkeeping)", "driver_s"),
    ]
    outside = (wall - total["model_generate_s"]) / wall
    trainer_metric = (wall - total["model_generate_s"] - total["policy_wrapper_s"]) / wall
    result = {
        "bench": "rollout_overhead",
        "command": "python bench/rollout_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine(),
        "load_avg_1_5_15_at_start": load_at_start,
        "shape": {"env_plan": [[n, g, o] for n, g, o in resolved.env_plan], "group_size": ro.group_size,
                  "max_turn": ro.max_turn, "max_actions_per_turn": ro.max_actions_per_turn,
                  "max_new_tokens": ro.max_new_tokens, "model": tc.model,
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "warm_start_steps": ws_steps, "warm_start_s": ws_seconds, "generation_batch": tc.generation_batch},
        "steps": steps,
        "total": total,
        "share_of_wall": {k: total[k] / wall for _label, k in parts},
        "outside_model_generate_share": outside,
        "outside_policy_share_trainer_metric": trainer_metric,
        "target_outside_model_share": 0.03,
        "decoder": args.decoder,
        "generation_tokens_per_s": total["generated_tokens"] / total["model_generate_s"],
    }
    print(f"rollout overhead: {args.steps} steps of {total['trajectories'] // args.steps} trajectories "
          f"({result['shape']['model']}, {', '.join(n for n, *_ in resolved.env_plan)}), "
          f"{total['turns']} turns, {total['env_steps']} env steps, {total['generated_tokens']} tokens; "
          f"load avg {load_at_start[0]:.2f} at start, {result['machine']['load_avg_1_5_15'][0]:.2f} at end, "
          f"{torch.get_num_threads()} threads")
    print(f"{'part':44s} {'seconds':>9s} {'share':>8s}")
    for label, key in parts:
        print(f"{label:44s} {total[key]:9.3f} {100 * total[key] / wall:7.2f}%")
    print(f"{'rollout wall time':44s} {wall:9.3f} {100.0:7.2f}%")
    print(f"outside the model: {100 * outside:.2f}% of rollout wall time (target <= 3%: "
          f"{'met' if outside <= 0.03 else 'NOT met'}); trainer's metric (outside policy.generate): "
          f"{100 * trainer_metric:.2f}%")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
