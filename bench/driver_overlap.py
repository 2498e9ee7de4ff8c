"""Would overlapping the rollout driver with the model pay here? ``run_lockstep`` against a two-lane driver.

Usage: python bench/driver_overlap.py [--steps 3] [--warm-start-steps N] [--json OUT] [key=value ...]

``bench/rollout_overhead.py`` finds the work outside the model (env steps, prompt building, the policy's padding and
bookkeeping) to be a fixed ~0.4 ms a turn. One way to hide it is to overlap it with the model: split the episodes into
two lanes (the first and the second half of the groups) and, while one lane's ``policy.generate`` call runs in a
worker thread, send the other lane's results to its episodes (their env steps and next prompts) in this thread. This
script runs that two-lane driver (written here, not part of ragen) and ragen's ``run_lockstep`` on the same preset
(the torch trainer's CPU preset after its warm-start, as ``rollout_overhead.py``), alternating per step with the same
seeds, and prints each one's rollout wall time. The samples differ between the two (the random generator is consumed
in another order), so the turns and tokens of each are printed too. It also times one ``generate`` call of all rows
against two calls of half the rows on the step's first prompts, so the cost of half batches is visible on its own.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
for path in (str(_REPO), str(_REPO / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from _machine import machine  # noqa: E402  (bench/_machine.py)
from rollout_overhead import load_preset  # noqa: E402  (bench/rollout_overhead.py)


def run_two_lanes(episodes: list[Any], policy: Any, group_size: int) -> Any:
    """``run_lockstep``'s work in two lanes: one lane's ``generate`` call runs in a worker thread (one call at a
    time, lanes in turn) while this thread advances the other lane's episodes with the results of its last call."""
    from ragen_core.starpo.rollout import EnvCall, RolloutBatch

    gens = [ep.run() for ep in episodes]
    half = (len(gens) // group_size // 2) * group_size or len(gens)
    lanes = [list(range(half)), list(range(half, len(gens)))]
    pending: dict[int, Any] = {i: next(g) for i, g in enumerate(gens)}
    done: dict[int, Any] = {}

    def send(i: int, value: Any) -> None:
        try:
            pending[i] = gens[i].send(value)
        except StopIteration as stop:
            done[i] = stop.value
            pending.pop(i)

    def advance(lane: list[int]) -> list[int]:
        while calls := [i for i in lane if isinstance(pending.get(i), EnvCall)]:
            for i in calls:
                send(i, pending[i].run())
        return [i for i in lane if i in pending]

    inflight: dict[int, tuple[list[int], Any]] = {}
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lane-generate") as pool:
        turn = 0
        while pending or inflight:
            lane = turn % 2
            turn += 1
            if lane in inflight:
                ids, future = inflight.pop(lane)
                for i, result in zip(ids, future.result()):
                    send(i, result)
            waiting = advance(lanes[lane])
            if waiting:
                inflight[lane] = (waiting, pool.submit(policy.generate, [pending[i] for i in waiting]))
    return RolloutBatch([done[i] for i in range(len(gens))])


def first_requests(episodes: list[Any]) -> list[Any]:
    """Each episode's first generation request (its env calls run until it asks for one)."""
    from ragen_core.starpo.rollout import EnvCall

    out = []
    for ep in episodes:
        gen = ep.run()
        request = next(gen)
        while isinstance(request, EnvCall):
            request = gen.send(request.run())
        out.append(request)
    return out


def setup(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """The preset, its registries, an ``HFPolicy`` over the preset's model after its warm-start, and the codec."""
    import torch

    from ragen_core.starpo.chat import ChatCodec
    from ragen_plugins_torch.models import load_model_and_tokenizer
    from ragen_plugins_torch.policy import HFPolicy
    from ragen_plugins_torch.sft import demonstration_samples, warm_start

    resolved, registries = load_preset(args.overrides)
    cfg, tc, ro = resolved.config, resolved.trainer, resolved.config.rollout
    torch.manual_seed(cfg.run.seed)
    model, tokenizer = load_model_and_tokenizer(tc.model, dtype=torch.float32, device="cpu")
    policy = HFPolicy(model, tokenizer, device="cpu", generation_batch=tc.generation_batch,
                      share_prompts=tc.share_prompts, prefix_cache_mb=tc.prefix_cache_mb)
    codec = ChatCodec(tokenizer, think=ro.think)
    ws_steps = tc.warm_start_steps if args.warm_start_steps is None else args.warm_start_steps
    if ws_steps:
        samples = demonstration_samples(registries, resolved.env_plan, codec, ro, groups=tc.warm_start_groups,
                                        seed=cfg.run.seed)
        warm_start(policy, samples, steps=ws_steps, lr=tc.warm_start_lr, batch_size=tc.warm_start_batch,
                   seed=cfg.run.seed)
    return resolved, registries, policy, codec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="rollout steps per driver (default 3)")
    parser.add_argument("--warm-start-steps", type=int, default=None,
                        help="format warm-start steps before measuring (default: the preset's)")
    parser.add_argument("--json", default="bench/results/driver_overlap.json")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. rollout.env_groups=8")
    args = parser.parse_args(argv)

    import torch

    from ragen_core.runner import group_seeds
    from ragen_core.starpo.rollout import make_episodes, run_lockstep

    start = machine()
    print(f"load average at start: {start['load_avg_1_5_15'][0]:.2f}; torch threads {start['torch_threads']}")
    resolved, registries, policy, codec = setup(args)
    cfg, ro = resolved.config, resolved.config.rollout
    drivers = {"lockstep": lambda eps: run_lockstep(eps, policy, env_workers=ro.env_workers),
               "two lanes": lambda eps: run_two_lanes(eps, policy, ro.group_size)}
    rows: dict[str, dict[str, float]] = {name: {"wall_s": 0.0, "turns": 0, "tokens": 0} for name in drivers}
    halves = {"one call": 0.0, "two half calls": 0.0}
    for step in range(1, args.steps + 1):
        seeds = group_seeds(ro.seed_train, (step - 1) * ro.env_groups, ro.env_groups)
        for name, drive in drivers.items():
            torch.manual_seed(cfg.run.seed * 1_000_003 + step)
            tokens, t0 = policy.generated_tokens, time.perf_counter()
            episodes = make_episodes(registries.envs, resolved.env_plan, seeds=seeds, group_size=ro.group_size,
                                     config=ro, codec=codec, temperature=ro.temperature)
            batch = drive(episodes)
            rows[name]["wall_s"] += time.perf_counter() - t0
            rows[name]["turns"] += sum(len(t.turns) for t in batch)
            rows[name]["tokens"] += policy.generated_tokens - tokens
        requests = first_requests(make_episodes(registries.envs, resolved.env_plan, seeds=seeds,
                                                group_size=ro.group_size, config=ro, codec=codec,
                                                temperature=ro.temperature))
        for label, parts in (("one call", [requests]),
                             ("two half calls", [requests[:len(requests) // 2], requests[len(requests) // 2:]])):
            torch.manual_seed(step)
            t0 = time.perf_counter()
            for part in parts:
                policy.generate(part)
            halves[label] += time.perf_counter() - t0

    end = machine()
    print(f"{'driver':<12} {'rollout s':>10} {'turns':>7} {'tokens':>7} {'ms / turn':>10}")
    for name, r in rows.items():
        print(f"{name:<12} {r['wall_s']:>10.3f} {r['turns']:>7} {r['tokens']:>7} "
              f"{1000 * r['wall_s'] / max(r['turns'], 1):>10.3f}")
    ratio = rows["two lanes"]["wall_s"] / rows["lockstep"]["wall_s"]
    print(f"two lanes / lockstep rollout time: {ratio:.3f}; first turn of each step, one generate call of all rows "
          f"{halves['one call']:.3f} s against two calls of half {halves['two half calls']:.3f} s")
    print(f"load average at end: {end['load_avg_1_5_15'][0]:.2f}")
    out = {"bench": "driver_overlap", "command": "python " + " ".join(["bench/driver_overlap.py", *sys.argv[1:]]),
           "drivers": rows, "two_lanes_over_lockstep": ratio, "first_turn_generate_s": halves,
           "machine_start": start, "machine_end": end}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
