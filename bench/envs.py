"""Environment throughput: resets/s and steps/s for every registered env and variant.

Usage: python bench/envs.py [--seconds 0.5] [--only NAME ...] [--json OUT.json]

Each env is timed for about ``--seconds`` on resets (fresh seeds, so generation cost is included) and on steps
(random valid actions, or the oracle's answers for free-form envs, resetting when an episode ends). Sokoban is also
timed by room size and box count, its known hotspot. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from ragen_core.plugins import build_plugin_manager, collect_registries


def rate(fn: Any, seconds: float) -> float:
    """Calls of ``fn(i)`` per second over about ``seconds`` (at least 3 calls)."""
    n, start = 0, time.perf_counter()
    while True:
        fn(n)
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and n >= 3:
            return n / elapsed


def bench_env(make: Any, seconds: float) -> dict[str, float]:
    env = make()
    rng = random.Random(0)
    resets = rate(lambda i: env.reset(seed=10_000 + i), seconds)
    env.reset(seed=0)
    names = list(env.action_names) if env.action_names else None
    state = {"episodes": 0}

    def one_step(i: int) -> None:
        if names:
            action = rng.choice(names)
        else:
            action = env.oracle_action() or "0"
        _o, _r, terminated, truncated, _info = env.step(action)
        if terminated or truncated or i % env.max_actions_per_traj == env.max_actions_per_traj - 1:
            state["episodes"] += 1
            env.reset(seed=state["episodes"])

    steps = rate(one_step, seconds)
    return {"resets_per_s": resets, "steps_per_s": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--skip", nargs="*", default=["lean", "searchqa_dense"],
                        help="envs needing an outside server or a long first build (default: lean, searchqa_dense)")
    parser.add_argument("--json", default="bench/results/envs.json")
    args = parser.parse_args(argv)
    envs = collect_registries(build_plugin_manager()).envs
    rows: list[dict[str, Any]] = []
    for name in envs.names():
        if (args.only and name not in args.only) or name in args.skip:
            continue
        rows.append({"env": name, **bench_env(lambda n=name: envs.make(n), args.seconds)})
    if not args.only or "sokoban" in args.only:
        for dim, boxes in [((6, 6), 1), ((7, 7), 2), ((8, 8), 2), ((10, 10), 3)]:
            label = f"sokoban {dim[0]}x{dim[1]} {boxes} box{'es' if boxes > 1 else ''}"
            opts = {"dim_room": list(dim), "num_boxes": boxes}
            rows.append({"env": label, **bench_env(lambda o=opts: envs.make("sokoban", o), args.seconds)})
    print(f"{'env':32s} {'resets/s':>12s} {'steps/s':>12s}")
    for r in rows:
        print(f"{r['env']:32s} {r['resets_per_s']:12,.0f} {r['steps_per_s']:12,.0f}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    command = "python bench/envs.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out.write_text(json.dumps({"bench": "envs", "command": command, "python": sys.version.split()[0],
                               "load_avg_1_5_15": list(load),
                               "cpu_count": os.cpu_count(), "seconds": args.seconds, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
