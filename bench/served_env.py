"""A served env against the same env in process: env steps per second over OpenEnv's protocol on 127.0.0.1.

``ragen env serve NAME`` runs in another process (the way a run uses it); this process plays the same episodes
(same seeds, same random valid actions) three ways: the env made in process, one ``remote`` session at a time, and
``--sessions`` remote sessions at once from as many threads (what a rollout with ``env_workers`` does). Each episode
is a reset plus up to ``--actions`` steps; steps per second counts resets and steps. Prints the load average at
start and end; a ratio is only worth quoting from an idle machine.

Usage: python bench/served_env.py [--env sokoban] [--episodes 200] [--actions 10] [--sessions 8]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def play(make: Any, seeds: list[int], actions: int) -> int:
    """Play one episode per seed with random valid actions (seeded by the seed); returns resets + steps."""
    calls = 0
    for seed in seeds:
        env = make()
        env.reset(seed=seed)
        rng, names = random.Random(seed), list(env.action_names or ["1"])
        calls += 1
        for _ in range(actions):
            *_, terminated, truncated, _info = env.step(rng.choice(names))
            calls += 1
            if terminated or truncated:
                break
        env.close()
    return calls


def timed(label: str, fn: Any) -> float:
    start = time.perf_counter()
    calls = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<34} {calls:>6} calls in {seconds:7.2f} s = {calls / seconds:9.1f} calls/s")
    return calls / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args(argv)
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_plugins_openenv.envs import RemoteEnv

    envs = collect_registries(build_plugin_manager()).envs
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}  cores: {os.cpu_count()}")
    server = subprocess.Popen([sys.executable, "-m", "ragen_core", "env", "serve", args.env, "--port", "0",
                               "--max-sessions", str(max(args.sessions, 1) * 2)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+", server.stdout.readline())
        if url is None:
            raise SystemExit("the server did not start")
        seeds = list(range(args.episodes))
        local = timed(f"in process ({args.env})", lambda: play(lambda: envs.make(args.env), seeds, args.actions))
        remote = timed("served, 1 session at a time",
                       lambda: play(lambda: RemoteEnv(url=url.group(0)), seeds, args.actions))
        chunks = [seeds[i::args.sessions] for i in range(args.sessions)]
        with ThreadPoolExecutor(args.sessions) as pool:
            many = timed(f"served, {args.sessions} sessions at once", lambda: sum(pool.map(
                lambda chunk: play(lambda: RemoteEnv(url=url.group(0)), chunk, args.actions), chunks)))
        print(f"served / in process: {remote / local:.3f} (1 session), {many / local:.3f} ({args.sessions} sessions)")
    finally:
        server.terminate()
        server.wait(30)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
