"""How fast can a model learn an env at all? Supervised training on the env's ORACLE moves, then validation.

A diagnostic for choosing a model and an env, not a training recipe: it replaces the format warm-start's random
valid actions by the env's optimal next move (``env.oracle_action()``, one move per turn), so unlike the real
warm-start it *does* teach the task. If a model cannot reach a success rate well above random after N supervised
steps with exact labels for every turn, RL will not get there in a comparable number of optimiser steps from a
far noisier signal. It runs ``ragen train`` in-process with ``trainer.steps=1`` and prints validation success
after the supervised phase (``step 0``) next to a random policy making one move per turn on the same rooms.

Usage: python bench/oracle_ceiling.py [--steps 150] [--demos 400] [key=value ...]   (overrides go to ragen train)
Example: python bench/oracle_ceiling.py --steps 400                   # the embedded default's env and model
         python bench/oracle_ceiling.py env=frozenlake_det --steps 150
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _oracle_demonstrations() -> None:
    """Make the warm-start's demonstration policy answer the env's oracle move (random where it has none)."""
    import ragen_plugins_torch.sft as sft
    from ragen_core.starpo.rollout import GenerationResult

    def generate(self: sft.DemoPolicy, requests: list) -> list:
        out = []
        for req in requests:
            env = self.envs[req.episode_id]
            action = getattr(env, "oracle_action", lambda: None)() or self.rng.choice(list(env.action_names))
            text = (f" {self.rng.choice(sft.REASONING)} </think> <answer> {action} </answer>" if self.think
                    else f" {action} </answer>")
            ids = tuple(self.tokenizer.encode(text, add_special_tokens=False))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids)))
        return out

    sft.DemoPolicy.generate = generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="supervised steps on the oracle's moves")
    parser.add_argument("--demos", type=int, default=400, help="oracle demonstrations (one room each)")
    parser.add_argument("--out", default="bench/results/oracle_ceiling")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    from _machine import mark_bench_dir, replace_bench_dir

    run_dir = Path(args.out)
    replace_bench_dir(run_dir)  # only an earlier run of a bench is replaced, never other data
    _oracle_demonstrations()
    from click.testing import CliRunner

    from ragen_core.cli import build_cli
    from ragen_core.plugins import build_plugin_manager

    cmd = ["train", f"trainer.warm_start_steps={args.steps}", f"trainer.warm_start_groups={args.demos}",
           "trainer.steps=1", "trainer.save_every=0", "trainer.val_every=0", "trainer.dynamics_steps=0",
           *args.overrides,
           "--run-dir", str(run_dir)]
    result = CliRunner().invoke(build_cli(build_plugin_manager()), cmd)
    mark_bench_dir(run_dir)
    if result.exit_code != 0:
        print(result.output, file=sys.stderr)
        raise SystemExit(result.exit_code)
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    supervised = next(x["val/success"] for x in lines if "val/success" in x)
    sys.path.insert(0, str(Path(__file__).parent))
    from learning import baselines

    one_move = baselines(run_dir, most=1)["random"]
    print(f"{'supervised oracle steps':>24} {'val success':>12} {'random, one move per turn':>26}")
    print(f"{args.steps:>24} {supervised:>12.3f} {one_move:>26.3f}")
    out = run_dir / "summary.json"
    out.write_text(json.dumps({"steps": args.steps, "demos": args.demos, "overrides": args.overrides,
                               "val_success": supervised, "random_one_move": one_move}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
