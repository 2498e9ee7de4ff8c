"""Shared-context passes: the native trainer with ``trainer.share_prompts`` off and on, same config, one bench run.

Usage: python bench/shared_prefix.py [CONFIG] [--dynamics-steps 40] [--warm-start-steps 40] [--steps 4]
       [--out DIR] [key=value ...]   (figures: bench/results/shared_prefix.json)

CONFIG defaults to ``examples/frozenlake_multiturn.yaml`` (the tiny model on RAGEN's 3x3 lake, four turns of one
move in ``limited_multi_turn`` context: every turn-row repeats the 144-token system prompt). Each arm is a
``ragen train`` subprocess with the same seed and the stage lengths above (no validation, no checkpoints, no cached
dynamics weights), one after the other; the bench prints seconds per dynamics step and per warm-start step (from the
progress events) and the RL steps' generation, update and total seconds (from ``metrics.jsonl``, the first step
dropped as warm-up when there are more than one), with the load average before and after.

With sharing on, the prompt tokens every row of a batch shares run once per micro-batch in the update and the
supervised stages, and once per ``generate`` call in sampling; a GRPO group's first prompt once per group, as
before. Results are equal to float round-off (tests/torch/test_forward.py, tests/torch/test_policy_fast_paths.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def _seconds_per_step(events: list[dict], name: str) -> float | None:
    """Mean seconds per step between the first and the last progress event ``name`` (logged every 10 steps)."""
    rows = [e for e in events if e.get("event") == name]
    if len(rows) < 2 or rows[-1]["step"] == rows[0]["step"]:
        return None
    first, last = (datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")) for r in (rows[0], rows[-1]))
    return (last - first).total_seconds() / (rows[-1]["step"] - rows[0]["step"])


def run_arm(config: str, share: bool, args: argparse.Namespace, out: Path) -> dict[str, float | None]:
    run_dir = out / ("shared" if share else "plain")  # out is this bench run's own new folder: nothing is deleted
    cache = out / f"cache-{run_dir.name}"  # a model cache of each arm's own, so no arm reuses dynamics weights
    cmd = [sys.executable, "-m", "ragen_core.cli", "train", config, "--run-dir", str(run_dir),
           f"trainer.share_prompts={str(share).lower()}", f"trainer.steps={args.steps}",
           f"trainer.dynamics_steps={args.dynamics_steps}", f"trainer.warm_start_steps={args.warm_start_steps}",
           "trainer.val_every=0", "trainer.save_every=0", "run.log_format=json", *args.overrides]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "RAGEN_CACHE_DIR": str(cache)},
                          check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    events = []
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in steps if "timing_s/step" in m]
    if len(steps) > 1:
        steps = steps[1:]

    def mean(key: str) -> float:
        return statistics.fmean(m[key] for m in steps)

    return {"dynamics_s": _seconds_per_step(events, "dynamics"), "warm_start_s": _seconds_per_step(events, "warm_start"),
            "gen_s": mean("timing_s/gen"), "update_s": mean("timing_s/update"), "step_s": mean("timing_s/step"),
            "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(_REPO / "examples" / "frozenlake_multiturn.yaml"))
    parser.add_argument("--dynamics-steps", type=int, default=40)
    parser.add_argument("--warm-start-steps", type=int, default=40)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=_REPO / "bench" / "results" / "shared_prefix",
                        help="parent folder: each bench run makes a new run-<time> folder in it for its two run dirs "
                             "and model caches")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides for both arms")
    args = parser.parse_args()
    # a new folder for every bench run (never reused, so no earlier run's data is overwritten or mixed in)
    out = args.out / time.strftime("run-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=False)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; config {args.config}; {args.dynamics_steps} dynamics, "
          f"{args.warm_start_steps} warm-start and {args.steps} RL steps per arm", flush=True)
    results = {}
    for share in (False, True):
        results[share] = run_arm(args.config, share, args, out)
        print(f"  share_prompts={str(share).lower()}: done in {results[share]['wall_s']:.0f} s", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("\n| seconds | share_prompts=false | share_prompts=true | ratio |\n| --- | ---: | ---: | ---: |")
    for key, label in [("dynamics_s", "per dynamics step"), ("warm_start_s", "per warm-start step"),
                       ("gen_s", "generation per RL step"), ("update_s", "update per RL step"),
                       ("step_s", "RL step")]:
        a, b = results[False][key], results[True][key]
        if a is None or b is None:
            continue
        print(f"| {label} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
    summary = args.out.parent / "shared_prefix.json"
    summary.write_text(json.dumps({"config": args.config, "load_average": os.getloadavg()[0],
                                   "share_prompts": {str(k).lower(): v for k, v in results.items()}}, indent=2))
    print(f"\nfigures: {summary}")


if __name__ == "__main__":
    main()
