"""Does the embedded default learn? Runs ``ragen train`` (the trainer's preset, no config file) and prints validation
success before RL (step 0, after the format warm-start) and at the end, with the seeds used.

To tell what a gain is made of, it also plays the same validation set (same rooms, group size, turn and action
limits) with scripted policies that need no model: ``random`` answers 1 to ``max_actions_per_turn`` random valid
actions per turn (the warm-start demonstrations' own distribution, with a perfect format), ``random_max`` always
``max_actions_per_turn`` of them, and ``oracle`` the env's optimal moves (where the env has an oracle). A policy at
``random`` has learned the format and nothing of the task; the validation format-penalty rate is printed too.

Usage: python bench/learning.py [CONFIG] [key=value ...] [--seeds 0 1] [--minutes 10] [--check]
[--baselines-only RUN_DIR] (CONFIG and the overrides go to ``ragen train``; without CONFIG, the embedded default).
``--minutes`` is the wall-time budget of the target line; ``--check`` exits 1 when the target is not met, so the
bench fails when learning breaks.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--baselines-only", metavar="RUN_DIR", default=None,
                        help="only print the scripted baselines on the validation set of this run's config")
    parser.add_argument("--minutes", type=float, default=10.0, help="the wall-time budget per seed of the target")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is not met")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_intermixed_args(argv)
    if args.baselines_only:
        print_baselines(baselines(Path(args.baselines_only)))
        return 0
    rows = []
    # every bench run writes to a new folder and deletes nothing (--out may be a folder of the user's own runs)
    out = Path(args.out) / time.strftime("learning-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=False)
    load0 = os.getloadavg()
    print(f"run folders in {out}; load average at the start {load0[0]:.2f} (1 min), {load0[1]:.2f} (5 min)")
    for seed in args.seeds:
        run_dir = out / f"seed{seed}"
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "ragen_core", "train", f"run.seed={seed}", *args.overrides,
               "--run-dir", str(run_dir)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        minutes = (time.perf_counter() - t0) / 60
        lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        vals = [x for x in lines if "val/success" in x]
        first, last = vals[0], vals[-1]
        variants = sorted(k for k in last if k.startswith("val/") and k.endswith("/success") and k.count("/") == 2)
        rows.append({"seed": seed, "start": first["val/success"], "end": last["val/success"],
                     "gain_points": 100 * (last["val/success"] - first["val/success"]), "minutes": minutes,
                     "steps": last["step"], "per_variant": {k: (first.get(k), last[k]) for k in variants},
                     "format_penalty_rate": (first.get("val/format_penalty_rate"), last.get("val/format_penalty_rate")),
                     "truncated_rate": (first.get("val/truncated_rate"), last.get("val/truncated_rate")),
                     "train_success_last": lines[-1].get("train/success"), "baselines": baselines(run_dir),
                     "pretraining_cached": next((x["dynamics/cached"] for x in lines if "dynamics/cached" in x),
                                                None)})
    load = os.getloadavg()
    print(f"{'seed':>4} {'val success @0':>15} {'@end':>8} {'random':>7} {'oracle':>7} {'gain vs @0':>11} "
          f"{'vs random':>10} {'format pen. @0':>15} {'@end':>6} {'truncated @0':>13} {'@end':>6} {'steps':>6} "
          f"{'minutes':>8} {'dynamics':>9}")
    for r in rows:
        f0, f1 = (f"{x:.3f}" if x is not None else "-" for x in r["format_penalty_rate"])
        t0, t1 = (f"{x:.3f}" if x is not None else "-" for x in r["truncated_rate"])
        b = r["baselines"]
        r["gain_vs_random_points"] = 100 * (r["end"] - b["random"])
        oracle = f"{b['oracle']:.3f}" if "oracle" in b else "-"
        print(f"{r['seed']:>4} {r['start']:>15.3f} {r['end']:>8.3f} {b['random']:>7.3f} {oracle:>7} "
              f"{r['gain_points']:>11.1f} {r['gain_vs_random_points']:>10.1f} {f0:>15} {f1:>6} {t0:>13} {t1:>6} "
              f"{r['steps']:>6} {r['minutes']:>8.1f} {_stage(r['pretraining_cached']):>9}")
    print_baselines(rows[-1]["baselines"])
    met = all(min(r["gain_points"], r["gain_vs_random_points"]) >= 20 and r["minutes"] <= args.minutes for r in rows)
    print(f"target (>= 20 points above step 0 and above random, <= {args.minutes:g} minutes, every seed): "
          f"{'met' if met else 'NOT met'}; load average at the end {load[0]:.2f} (1 min), {load[1]:.2f} (5 min)")
    (out / "learning.json").write_text(json.dumps(rows, indent=2))
    print(f"wrote {out / 'learning.json'}")
    return 1 if args.check and not met else 0


def _stage(cached: float | None) -> str:
    """The dynamics column: ``-`` (no such stage), ``trained`` (this run paid for it) or ``cached`` (loaded)."""
    return "-" if cached is None else ("cached" if cached else "trained")


class _Scripted:
    """A model-free policy on the core's character tokenizer: ``random`` (1 to ``most`` random valid actions per
    turn), ``random_max`` (always ``most``) or ``oracle`` (up to ``most`` of the env's optimal moves, planned on a
    copy of the env)."""

    def __init__(self, episodes: list, kind: str, most: int, sep: str, seed: int, think: bool = True) -> None:
        from ragen_core.starpo.chat import TextTokenizer

        self.think = think
        self.envs = {ep.episode_id: ep.env for ep in episodes}
        self.kind, self.most, self.sep, self.rng = kind, most, sep, random.Random(seed)
        self.tokenizer = TextTokenizer()

    def _actions(self, env) -> list[str]:
        if self.kind == "oracle" and hasattr(env, "oracle_action"):
            sim, out = copy.deepcopy(env), []
            while len(out) < self.most and (action := sim.oracle_action()) is not None:
                out.append(str(action))
                if sim.step(str(action))[2]:
                    break
            if out:
                return out
        names = list(getattr(env, "action_names", None) or ["0"])
        k = self.most if self.kind == "random_max" else self.rng.randint(1, self.most)
        return [self.rng.choice(names) for _ in range(k)]

    def generate(self, requests: list) -> list:
        from ragen_core.starpo.rollout import GenerationResult

        out = []
        for req in requests:
            answer = f" {self.sep} ".join(self._actions(self.envs[req.episode_id]))
            # the prompt already ends with the opening tag: <think> (then reasoning, </think><answer>) or <answer>
            text = f"I will act.</think><answer>{answer}</answer>" if self.think else f" {answer} </answer>"
            ids = tuple(self.tokenizer.encode(text))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids), mean_entropy=0.0))
        return out


def baselines(run_dir: Path, seed: int = 0, most: int | None = None, repeats: int = 8) -> dict[str, float]:
    """Validation success of the scripted policies on the validation set of the run in ``run_dir``, with up to
    ``most`` actions per turn (default: the run's ``rollout.max_actions_per_turn``), averaged over ``repeats`` plays
    of the whole set (random policies are noisy on 128 episodes)."""
    from ragen_core.config import load_config, resolve_config
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.runner import rollout_metrics
    from ragen_core.starpo.chat import ChatCodec, TextTokenizer
    from ragen_core.starpo.rollout import make_episodes, run_lockstep

    config = load_config(run_dir / "config.yaml")
    pm = build_plugin_manager(config)
    registries = collect_registries(pm)
    resolved = resolve_config(config, registries, pm)
    r = config.rollout
    seeds = [r.seed_val + i for i in range(r.val_env_groups)]
    out = {}
    for kind in ("random", "random_max", "oracle"):
        total = 0.0
        for rep in range(repeats if kind != "oracle" else 1):
            episodes = make_episodes(registries.envs, resolved.val_env_plan, seeds=seeds, group_size=r.val_group_size,
                                     config=r, codec=ChatCodec(TextTokenizer(), think=r.think))
            policy = _Scripted(episodes, kind, most or r.max_actions_per_turn, r.action_sep, seed + rep, r.think)
            total += rollout_metrics(run_lockstep(episodes, policy), "val").get("val/success", 0.0)
        out[kind] = total / (repeats if kind != "oracle" else 1)
    return out


def print_baselines(b: dict[str, float]) -> None:
    print("scripted policies on the same validation set (random ones: mean of 8 plays): "
          + ", ".join(f"{k} {v:.3f}" for k, v in b.items())
          + "  (random = the warm-start's action distribution with a perfect format)")


if __name__ == "__main__":
    sys.exit(main())
