"""Sokoban room generation: ragen's generator against gym-sokoban's ``generate_room``.

For 6x6 rooms with 1 box, 8x8 with 2 and 10x10 with 3, measures:

- ragen: ``SokobanEnv.reset`` per second (generation only, ``compute_optimal_moves=False``) at its default search
  depth (30) and at 300, gym-sokoban's fixed time-to-live (the same search, so the same distribution of rooms);
- gym-sokoban: ``generate_room(dim, num_steps=int(1.7 * (rows + cols)), num_boxes, second_player=False)`` per second,
  counting failed calls (gym-sokoban raises when no room scores above 0; RAGEN retries them) in the elapsed time;
- difficulty: the mean optimal number of moves of the generated rooms (ragen's BFS solver on both).

gym-sokoban (``pip install --no-deps gym-sokoban``) imports the old ``gym`` package at its top level; its room
generator needs only numpy, so when ``gym`` is missing the script loads ``gym_sokoban/envs/room_utils.py`` straight
from the installed package. Without gym-sokoban the script reports ragen's figures alone and says so.

Usage: ``python bench/sokoban_vs_gym_sokoban.py [--seconds S]`` (each measurement stops after about S seconds;
the default keeps the whole run well under two minutes).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import random
import signal
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from ragen_plugins_envs.sokoban import SokobanEnv, solve

SETTINGS: tuple[tuple[tuple[int, int], int], ...] = (((6, 6), 1), ((8, 8), 2), ((10, 10), 3))


def load_gym_sokoban() -> tuple[ModuleType | None, str]:
    """gym-sokoban's ``room_utils`` module and how it was loaded (or None and why not)."""
    try:
        from gym_sokoban.envs import room_utils  # type: ignore[import-not-found]

        return room_utils, "imported gym_sokoban.envs.room_utils"
    except Exception as exc:  # noqa: BLE001 - ImportError, or whatever its old dependencies raise
        reason = f"{type(exc).__name__}: {exc}"
    spec = importlib.util.find_spec("gym_sokoban")
    if spec is None or not spec.submodule_search_locations:
        return None, f"gym-sokoban is not installed ({reason}); pip install --no-deps gym-sokoban"
    path = pathlib.Path(next(iter(spec.submodule_search_locations))) / "envs" / "room_utils.py"
    module_spec = importlib.util.spec_from_file_location("gym_sokoban_room_utils", path)
    if module_spec is None or module_spec.loader is None:
        return None, f"cannot load {path}"
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - report whatever stops the third-party module
        return None, f"gym-sokoban's room_utils.py failed to load: {type(exc).__name__}: {exc}"
    return module, f"loaded {path} directly (the package's __init__ needs gym: {reason})"


class _OutOfTime(Exception):
    pass


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise _OutOfTime


def timed_rooms(make: Callable[[int], np.ndarray | None], seconds: float, max_rooms: int) -> tuple[float, list[Any]]:
    """Call ``make(i)`` until ``max_rooms`` rooms or ``seconds`` elapsed (a call running past 3x the budget is
    interrupted); returns (rooms per second, rooms). ``make`` returns None for a failed attempt."""
    rooms: list[Any] = []
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 3 * seconds)
    start = time.perf_counter()
    i = 0
    try:
        while len(rooms) < max_rooms and time.perf_counter() - start < seconds:
            room = make(i)
            i += 1
            if room is not None:
                rooms.append(room)
    except _OutOfTime:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start
    return len(rooms) / elapsed, rooms


def gym_to_codes(structure: np.ndarray, state: np.ndarray) -> np.ndarray:
    """gym-sokoban's (room_structure, room_state) pair as one ragen room array."""
    room = structure.astype(np.int8).copy()  # 0 wall, 1 floor, 2 target
    box, target, player = np.isin(state, (3, 4)), structure == 2, state == 5
    room[box & target], room[box & ~target] = 3, 4
    room[player & target], room[player & ~target] = 6, 5
    return room


def mean_optimal_moves(rooms: list[np.ndarray], limit: int = 40) -> str:
    lengths = [len(plan) for plan in (solve(r, max_states=300_000) for r in rooms[:limit]) if plan is not None]
    return f"{np.mean(lengths):.1f}" if lengths else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="time budget of each measurement")
    args = parser.parse_args()
    gym_module, how = load_gym_sokoban()
    print(f"gym-sokoban: {how}")
    header = (f"{'setting':<12} {'ragen d=30':>11} {'ragen d=300':>12} {'gym-sokoban':>12} {'speed-up':>9} "
              f"{'opt moves ragen d=30 / d=300 / gym':>36}")
    print(header)
    print("-" * len(header))
    for dim, boxes in SETTINGS:
        rates, samples = [], []
        for depth in (30, 300):
            env = SokobanEnv(dim_room=dim, num_boxes=boxes, search_depth=depth, compute_optimal_moves=False)

            def reset(i: int, env: SokobanEnv = env) -> np.ndarray:
                env.reset(seed=i)
                return env.room()

            rate, rooms = timed_rooms(reset, args.seconds, 5000)
            rates.append(rate)
            samples.append(rooms)
        gym_rate, gym_moves, speedup = "n/a", "n/a", "n/a"
        if gym_module is not None:
            random.seed(0)
            np.random.seed(0)
            steps = int(1.7 * (dim[0] + dim[1]))

            def gym_room(_i: int, module: ModuleType = gym_module, dim: tuple = dim, steps: int = steps,
                         boxes: int = boxes) -> np.ndarray | None:
                try:
                    structure, state, _mapping = module.generate_room(dim=dim, num_steps=steps, num_boxes=boxes,
                                                                      second_player=False)
                except (RuntimeError, RuntimeWarning):
                    return None
                return gym_to_codes(structure, state)

            rate, rooms = timed_rooms(gym_room, args.seconds * 2, 500)
            gym_rate = f"{rate:.1f}/s" if rooms else f"<{1 / (6 * args.seconds):.2f}/s"
            speedup = f"{rates[1] / rate:.0f}x" if rooms else "-"
            gym_moves = mean_optimal_moves(rooms)
        moves = f"{mean_optimal_moves(samples[0])} / {mean_optimal_moves(samples[1])} / {gym_moves}"
        setting = f"{dim[0]}x{dim[1]}/{boxes}"
        print(f"{setting:<12} {rates[0]:>9.0f}/s {rates[1]:>10.1f}/s {gym_rate:>12} {speedup:>9} {moves:>36}",
              flush=True)
    print("speed-up: ragen at depth 300 (gym-sokoban's search, same rooms) over gym-sokoban; "
          "opt moves: mean optimal solution length (first 40 rooms).")


if __name__ == "__main__":
    main()
