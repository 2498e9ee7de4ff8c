"""Env throughput against RAGEN's own env code: FrozenLake and Sokoban, same seeds, same random actions, one process.

What is compared, for each env, on the same ``--seeds`` seeds (0, 1, ...):

- resets per second: ``reset(seed)`` on one env object, seed after seed (map or room generation included);
- episodes per second: ``reset(seed)`` then up to ``--actions`` random actions, stopping when the episode ends; the
  actions of a seed are the same list of move ids for both envs (drawn from ``random.Random(seed)``), given to
  RAGEN as its action ids (1..4) and to ragen as the names in the same order. The maps and rooms of a seed differ
  between the two (each env draws its own way), so the table also shows the mean actions an episode took.

The envs, each at RAGEN's default settings:

- FrozenLake: RAGEN's ``FrozenLakeEnv(FrozenLakeEnvConfig())`` (4x4, frozen probability 0.8, slippery with
  gymnasium's default success rate 1/3) against ragen's ``frozenlake`` with ``size=4, p=0.8,
  success_rate=1/3``, the same lake.
- Sokoban: RAGEN's ``SokobanEnv`` with its SimpleSokoban tag (6x6, one box, 100 steps; its search depth, 300)
  against ragen's ``sokoban`` (6x6, one box, its default search depth 30, optimal solution computed at reset); the
  row ``sokoban d=300`` runs ragen at RAGEN's search depth too. RAGEN's reverse play pulls only and then walks the
  player a few random steps, so its rooms are not gym-sokoban's, which ragen reproduces.

Rounds alternate which env goes first; the table shows the median of the rounds (all rounds are in the JSON). The
1-minute load average is printed at start and end: quote ratios from an idle machine only.

RAGEN's code is not part of this repository: clone it (``git clone https://github.com/RAGEN-AI/RAGEN``) and pass
the folder with ``--ragen-src``. The script imports ``ragen.env.frozen_lake.env`` and ``ragen.env.sokoban.env``
from there without running the ``ragen`` and ``ragen.env`` package ``__init__`` files (they import every env and
RAGEN's trainer). RAGEN's Sokoban needs gym-sokoban (``pip install --no-deps gym-sokoban==0.0.6``) and what it
imports on every step (it renders an RGB frame per step: ``imageio`` and ``pkg_resources`` from
``setuptools<81``); the old ``gym`` package, used by gym-sokoban only to define its env class and spaces, is
aliased to gymnasium when it is missing.

Usage: python bench/envs_vs_ragen.py --ragen-src DIR [--seeds 200] [--actions 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import sys
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLONE_HINT = ("clone RAGEN (git clone https://github.com/RAGEN-AI/RAGEN) and pass the folder: "
              "python bench/envs_vs_ragen.py --ragen-src RAGEN")


def alias_gym_to_gymnasium() -> bool:
    """Make ``import gym`` (gym-sokoban's) give gymnasium when the old gym is not installed; True when aliased."""
    try:
        importlib.import_module("gym")
        return False
    except ImportError:
        pass
    for name in ("", ".spaces", ".spaces.discrete", ".utils", ".utils.seeding", ".envs", ".envs.registration"):
        sys.modules["gym" + name] = importlib.import_module("gymnasium" + name)
    return True


def load_ragen(src: Path) -> dict[str, Any]:
    """RAGEN's FrozenLake and Sokoban env and config classes from the clone at ``src`` (exits with a message when
    they cannot be imported)."""
    if not (src / "ragen" / "env" / "frozen_lake").is_dir() or not (src / "ragen" / "env" / "sokoban").is_dir():
        raise SystemExit(f"{src} holds no ragen/env/frozen_lake and ragen/env/sokoban: {CLONE_HINT}")
    for name, folder in (("ragen", src / "ragen"), ("ragen.env", src / "ragen" / "env")):
        package = types.ModuleType(name)  # the package without its __init__ (it imports every env)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    aliased = alias_gym_to_gymnasium()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pkg_resources' deprecation warning
            lake = importlib.import_module("ragen.env.frozen_lake.env")
            lake_config = importlib.import_module("ragen.env.frozen_lake.config")
            soko = importlib.import_module("ragen.env.sokoban.env")
            soko_config = importlib.import_module("ragen.env.sokoban.config")
    except ImportError as exc:
        raise SystemExit(f"RAGEN's envs do not import ({type(exc).__name__}: {exc}). They need gymnasium, numpy, "
                         "omegaconf, gym-sokoban (pip install --no-deps gym-sokoban==0.0.6) and what gym-sokoban "
                         "imports: pip install imageio 'setuptools<81'") from exc
    return {"FrozenLakeEnv": lake.FrozenLakeEnv, "FrozenLakeEnvConfig": lake_config.FrozenLakeEnvConfig,
            "SokobanEnv": soko.SokobanEnv, "SokobanEnvConfig": soko_config.SokobanEnvConfig, "gym_aliased": aliased}


def ragen_player(env: Any) -> Callable[[int, list[int]], int]:
    """An episode of ragen's env: reset, then the moves (indices into its action names) until the episode ends."""
    names = list(env.action_names)

    def play(seed: int, plan: list[int]) -> int:
        env.reset(seed=seed)
        for taken, move in enumerate(plan, 1):
            _obs, _reward, terminated, truncated, _info = env.step(names[move])
            if terminated or truncated:
                return taken
        return len(plan)

    return play


def their_player(env: Any) -> Callable[[int, list[int]], int]:
    """An episode of RAGEN's env: reset, then the moves as its action ids (1..4) until ``done``."""

    def play(seed: int, plan: list[int]) -> int:
        env.reset(seed=seed)
        for taken, move in enumerate(plan, 1):
            _obs, _reward, done, _info = env.step(move + 1)
            if done:
                return taken
        return len(plan)

    return play


def make_cases(ragen: dict[str, Any]) -> list[dict[str, Any]]:
    """The compared pairs: a name, ragen's env and RAGEN's env (each built once, then reset seed after seed)."""
    from ragen_plugins_envs.frozenlake import FrozenLakeEnv
    from ragen_plugins_envs.sokoban import SokobanEnv

    their_lake = ragen["FrozenLakeEnv"](ragen["FrozenLakeEnvConfig"]())
    their_soko = ragen["SokobanEnv"](ragen["SokobanEnvConfig"](dim_room=(6, 6), num_boxes=1, max_steps=100))
    return [
        {"name": "frozenlake 4x4", "ours": FrozenLakeEnv(size=4, p=0.8, success_rate=1 / 3), "theirs": their_lake},
        {"name": "sokoban 6x6 1 box", "ours": SokobanEnv(), "theirs": their_soko},
        # RAGEN's side of this row is the row above's (the same env, timed once)
        {"name": "sokoban d=300", "ours": SokobanEnv(search_depth=300), "theirs": None,
         "theirs_of": "sokoban 6x6 1 box"},
    ]


def measure_round(case: dict[str, Any], seeds: list[int], plans: list[list[int]], theirs_first: bool) -> dict:
    """One round of a case: resets/s and episodes/s of both envs (in the given order), and actions per episode."""
    out: dict[str, Any] = {}
    sides = [(side, player) for side, player in (("theirs", their_player), ("ours", ragen_player))
             if case[side] is not None]
    for side, player in sides if theirs_first else sides[::-1]:
        env, play = case[side], player(case[side])
        start = time.perf_counter()
        for seed in seeds:
            env.reset(seed=seed)
        out[f"{side}_resets"] = len(seeds) / (time.perf_counter() - start)
        start = time.perf_counter()
        taken = [play(seed, plan) for seed, plan in zip(seeds, plans)]
        out[f"{side}_episodes"] = len(seeds) / (time.perf_counter() - start)
        out[f"{side}_actions"] = sum(taken) / len(taken)
    return out


def summarize(name: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds and the ratios ragen / RAGEN."""
    med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    return {"env": name, **med, "reset_ratio": med["ours_resets"] / med["theirs_resets"],
            "episode_ratio": med["ours_episodes"] / med["theirs_episodes"], "rounds": rounds}


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (f"{'env':<20} {'ragen resets/s':>15} {'RAGEN resets/s':>15} {'ratio':>7}   {'ragen ep/s':>11} "
              f"{'RAGEN ep/s':>11} {'ratio':>7}   {'actions/ep ragen / RAGEN':>24}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['env']:<20} {r['ours_resets']:>15,.0f} {r['theirs_resets']:>15,.1f} {r['reset_ratio']:>6.1f}x   "
              f"{r['ours_episodes']:>11,.0f} {r['theirs_episodes']:>11,.1f} {r['episode_ratio']:>6.1f}x   "
              f"{r['ours_actions']:>11.2f} / {r['theirs_actions']:<10.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ragen-src", type=Path, default=None, help="a clone of RAGEN (RAGEN-AI/RAGEN)")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=HERE / "results" / "envs_vs_ragen.json")
    args = parser.parse_args(argv)
    if args.ragen_src is None or not args.ragen_src.is_dir():
        problem = "no --ragen-src given" if args.ragen_src is None else f"--ragen-src {args.ragen_src}: no such folder"
        print(f"{problem}; {CLONE_HINT}", file=sys.stderr)
        return 1
    ragen = load_ragen(args.ragen_src.resolve())
    load_start = os.getloadavg()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in load_start)}  cores: {os.cpu_count()}"
          f"{'  (gym aliased to gymnasium)' if ragen['gym_aliased'] else ''}")
    seeds = list(range(args.seeds))
    plans = [[random.Random(s).randrange(4) for _ in range(args.actions)] for s in seeds]
    cases = make_cases(ragen)
    rounds: dict[str, list[dict[str, Any]]] = {case["name"]: [] for case in cases}
    for number in range(args.rounds):
        for case in cases:
            rounds[case["name"]].append(measure_round(case, seeds, plans, theirs_first=number % 2 == 0))
    for case in cases:
        for ours, theirs in zip(rounds[case["name"]], rounds[case.get("theirs_of", case["name"])]):
            ours.update({key: value for key, value in theirs.items() if key.startswith("theirs_")})
    rows = [summarize(name, results) for name, results in rounds.items()]
    load_end = os.getloadavg()
    print_table(rows)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in load_end)}  (medians of {args.rounds} rounds of "
          f"{args.seeds} seeds, up to {args.actions} actions per episode)")
    from _machine import machine  # bench/_machine.py (the script's folder is on sys.path)

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "bench": "envs_vs_ragen", "command": "python bench/envs_vs_ragen.py " + " ".join(sys.argv[1:]),
        "seeds": args.seeds, "actions": args.actions, "rounds": args.rounds, "gym_aliased": ragen["gym_aliased"],
        "load_avg_1_5_15_at_start": list(load_start), "load_avg_1_5_15_at_end": list(load_end),
        "machine": machine(), "rows": rows}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
