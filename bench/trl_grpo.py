"""ragen's torch trainer side by side with TRL's GRPOTrainer: same tiny model, batch, lengths, single-turn Countdown.

Usage: python bench/trl_grpo.py [--steps 4] [--prompts 8] [--generations 8] [--max-new-tokens 32] [--micro 16]
                                [--threads N] [--lr 1e-6] [--json OUT] [--order ragen,trl]
                                [--old-logprobs rollout|recompute]

Needs TRL (not a ragen dependency): ``pip install trl==1.16.0``; without it the
script says so and exits with status 1. Each side runs in its own process (``--side ragen|trl``) with the same torch
thread count, float32 weights on the CPU, and the same seed; the first step of each is reported apart as warm-up and
the figures are means over the others.

Both sides, per step: ``--prompts`` Countdown problems (the same seeds: ragen's group seeds ``seed_train + k``) x
``--generations`` samples each, one batched Hugging Face ``generate`` (temperature 1, top-p 1, no top-k, at most
``--max-new-tokens`` new tokens, stopping at ``<|im_end|>`` or ``</answer>``), reward = the Countdown env's score of
the parsed answer plus ragen's format penalty, group-normalised advantages (mean and std), then one AdamW step over
the whole batch in micro-batches of ``--micro`` (gradient accumulation), PPO-clipped loss (0.2 / 0.28), token-mean
per sequence then mean over sequences (ragen ``seq-mean-token-mean`` = TRL ``loss_type="grpo"``), entropy bonus 0,
no KL and no reference model (ragen ``use_kl_loss: false``, TRL ``beta=0``), gradient clip 1.0, no gradient
checkpointing, no warm-start, one PPO epoch / iteration.

What differs, by design of each framework (all counted in its time):

- ragen builds each prompt with its rollout loop (env reset, system + user message, chat template, tokenise) and
  TRL tokenises the same prompt text (a dataset column rendered by ragen's prompt builder; the ids are checked equal);
- ragen stops on the ``</answer>`` stop string (scanned in each row's text) and computes each token's log-prob and
  entropy while sampling; TRL stops on ``</answer>`` as an end token id (it is one token in the tiny vocabulary),
  keeps no logits;
- neither side runs a separate forward pass for PPO's old log-probs: TRL skips it when generation and optimisation
  are aligned (``steps_per_generation == gradient_accumulation_steps``, one iteration), as here, and ragen takes the
  sampler's log-probs (``trainer.old_logprobs: rollout``; equal to a recomputation to float round-off, see
  tests/torch/test_old_logprobs.py); before session 17 ragen ran that extra pass here;
- ragen samples with its native loop (the same tokens as ``generate`` from the same random state, the exponential
  noise of the next step drawn in a second thread while the model runs) and keeps prefixes in its store (unused
  here: one turn);
- ragen computes rollout metrics and the re-tokenisation drift check each step; TRL logs its metrics each step
  (``logging_steps=1``); TRL's learning rate is constant (``lr_scheduler_type="constant"``) like ragen's.

Step time: ragen's ``timing_s/step`` (rollout through optimiser step); TRL's ``on_step_begin`` → ``on_step_end``
(generation through optimiser step). Generation time: ragen's ``timing_s/gen`` (inside ``policy.generate``), TRL's
``_generate_single_turn`` (padding, ``generate``, end-of-sequence masking). Update time: ragen's ``timing_s/update``;
TRL's step time minus ``_generate_and_score_completions``. Process CPU seconds per step (all threads, validation
excluded) and the best (shortest) step are printed too: on a shared machine a step's wall time can be stretched many
times by other processes, CPU time and the best step much less so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from _machine import machine  # noqa: E402  (bench/_machine.py)

TRL_VERSION = "1.16.0"
INSTALL = f"pip install trl=={TRL_VERSION}"



def config_data(args: argparse.Namespace, model_folder: str) -> dict[str, Any]:
    """ragen's config for the comparison (the TRL side reads the rollout section from it too)."""
    return {
        "run": {"name": "trl-compare", "seed": 0},
        "envs": [{"name": "countdown"}],
        "rollout": {"env_groups": args.prompts, "group_size": args.generations, "max_turn": 1,
                    "max_new_tokens": args.max_new_tokens, "val_env_groups": 1, "val_group_size": 1,
                    "temperature": 1.0, "top_p": 1.0, "top_k": 0, "reward_norm": "identity"},
        "estimator": "grpo",
        "filter": "none",
        "trainer": {"name": "torch", "model": model_folder, "steps": args.steps, "actor_lr": args.lr,
                    "ppo_epochs": 1, "mini_batch_size": args.prompts * args.generations,
                    "micro_batch_size": args.micro, "entropy_coeff": 0.0, "loss_agg": "seq-mean-token-mean",
                    "clip_low": 0.2, "clip_high": 0.28, "grad_clip": 1.0, "use_kl_loss": False,
                    "warm_start_steps": 0, "val_every": 0, "save_every": 0, "early_stop": False,
                    "device": "cpu", "dtype": "float32", "generation_batch": args.prompts * args.generations,
                    # TRL computes no old log-probs when generation and optimisation are aligned (one iteration):
                    # the same work on ragen's side is the sampler's log-probs as PPO's old ones
                    "old_logprobs": args.old_logprobs},
    }


# --------------------------------------------------------------------------------------------------- ragen side

def run_ragen(args: argparse.Namespace, model_folder: str, workdir: Path) -> dict[str, Any]:
    import contextlib
    import io

    import yaml

    from ragen_core.cli import run_trainer
    from ragen_plugins_torch.trainer import TorchTrainer

    cpu: list[float] = []  # process CPU seconds of each step (validation excluded)
    in_validation = {"cpu": 0.0}
    orig_step, orig_validate = TorchTrainer._step, TorchTrainer._validate

    def _step(trainer: Any, *a: Any, **kw: Any) -> Any:
        in_validation["cpu"], c0 = 0.0, time.process_time()
        try:
            return orig_step(trainer, *a, **kw)
        finally:
            cpu.append(time.process_time() - c0 - in_validation["cpu"])

    def _validate(trainer: Any, *a: Any, **kw: Any) -> Any:
        c0 = time.process_time()
        try:
            return orig_validate(trainer, *a, **kw)
        finally:
            in_validation["cpu"] += time.process_time() - c0

    TorchTrainer._step, TorchTrainer._validate = _step, _validate
    path = workdir / "ragen.yaml"
    path.write_text(yaml.safe_dump(config_data(args, model_folder), sort_keys=False))
    run_dir = workdir / "ragen-run"
    with contextlib.redirect_stdout(io.StringIO()):
        run_trainer("train", (str(path),), str(run_dir))
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = []
    for x in lines:
        if "timing_s/gen" not in x:
            continue
        steps.append({
            "step_s": x["timing_s/step"], "generation_s": x["timing_s/gen"],
            "rollout_s": x["timing_s/gen"] + x["timing_s/env"], "update_s": x["timing_s/update"],
            "generated_tokens": round(x["perf/tokens_per_s"] * x["timing_s/gen"]),
            "trained_tokens": x.get("rollout/trained_tokens", 0.0), "reward_mean": x.get("rollout/reward_mean"),
        })
    for row, c in zip(steps, cpu):
        row["cpu_s"] = c
    return {"steps": steps}


# --------------------------------------------------------------------------------------------------- TRL side

def countdown_prompts(args: argparse.Namespace, model_folder: str, tokenizer: Any) -> tuple[list[str], list[int], Any]:
    """Prompt texts of ragen's rollout loop for the seeds of every step (row k: seed ``seed_train + k``), checked to
    tokenise back to the very ids ragen feeds the model."""
    from ragen_core.config import load_config
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.starpo.chat import ChatCodec
    from ragen_core.starpo.rollout import Episode, GenerationRequest

    with tempfile.TemporaryDirectory() as tmp:
        import yaml

        path = Path(tmp) / "c.yaml"
        path.write_text(yaml.safe_dump(config_data(args, model_folder)))
        config = load_config(path)
    ro = config.rollout
    envs = collect_registries(build_plugin_manager(config)).envs
    codec = ChatCodec(tokenizer, think=ro.think)
    texts, seeds = [], []
    for k in range(args.steps * args.prompts):
        seed = ro.seed_train + k
        episode = Episode(envs.make("countdown"), name="countdown", group_id=k, seed=seed, episode_id=k,
                          config=ro, codec=codec)
        gen = episode.run()
        request = gen.send(next(gen).run())  # the reset, then the first generation request
        assert isinstance(request, GenerationRequest)
        text = tokenizer.decode(list(request.prompt_ids), skip_special_tokens=False)
        if tokenizer(text=text)["input_ids"] != list(request.prompt_ids):
            raise SystemExit(f"prompt of seed {seed}: TRL's tokenisation of the text differs from ragen's ids")
        texts.append(text)
        seeds.append(seed)
    return texts, seeds, (envs, codec, ro)


def run_trl(args: argparse.Namespace, model_folder: str, workdir: Path) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ragen_core.starpo.chat import parse_response

    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    answer_end = tokenizer.convert_tokens_to_ids("</answer>")
    if answer_end is None or answer_end == tokenizer.unk_token_id:
        raise SystemExit("the tiny tokenizer has no single '</answer>' token: the stop rules would differ")
    # ragen stops at its end token (<|im_end|>) or the '</answer>' stop string; TRL ends on these ids
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, answer_end]
    texts, seeds, (envs, codec, ro) = countdown_prompts(args, model_folder, tokenizer)
    dataset = Dataset.from_dict({"prompt": texts, "seed": seeds})

    def countdown_reward(prompts: list[str], completions: list[str], seed: list[int], **_: Any) -> list[float]:
        """What ragen's episode does with one turn: parse, step the env with the actions, add the format penalty."""
        out = []
        for text, s in zip(completions, seed):
            env = envs.make("countdown")
            env.reset(seed=int(s))
            parsed = parse_response(codec.open_tag + text, think=ro.think, action_sep=ro.action_sep,
                                    max_actions=min(ro.max_actions_per_turn, int(env.max_actions_per_traj)))
            reward = 0.0
            for action in parsed.actions:
                _obs, r, terminated, truncated, _info = env.step(action)
                reward += float(r)
                if terminated or truncated:
                    break
            out.append(reward + (ro.format_penalty if parsed.penalised else 0.0))
        return out

    batch = args.prompts * args.generations
    config = GRPOConfig(
        output_dir=str(workdir / "trl-run"), max_steps=args.steps, per_device_train_batch_size=args.micro,
        gradient_accumulation_steps=batch // args.micro, num_generations=args.generations,
        max_completion_length=args.max_new_tokens, learning_rate=args.lr, lr_scheduler_type="constant",
        warmup_steps=0, weight_decay=0.01, max_grad_norm=1.0, beta=0.0, num_iterations=1, epsilon=0.2,
        epsilon_high=0.28, loss_type="grpo", scale_rewards="group", temperature=1.0, top_p=1.0, top_k=0,
        use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False, logging_steps=1, save_strategy="no",
        report_to="none", shuffle_dataset=False, seed=0, disable_tqdm=True, dataloader_num_workers=0,
        log_completions=False)
    trainer = GRPOTrainer(model=model, reward_funcs=countdown_reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer)
    if trainer.args.generation_batch_size != batch or trainer.args.steps_per_generation != batch // args.micro:
        raise SystemExit(f"TRL generation batch {trainer.args.generation_batch_size} != {batch}")

    timings: dict[str, float] = {"generation_s": 0.0, "score_s": 0.0}
    counts: dict[str, int] = {"generated_tokens": 0, "trained_tokens": 0}
    orig_gen, orig_score = trainer._generate_single_turn, trainer._generate_and_score_completions

    def generate_single_turn(prompt_ids: Any, *a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        completion_ids, logprobs = orig_gen(prompt_ids, *a, **kw)
        timings["generation_s"] += time.perf_counter() - t0
        counts["generated_tokens"] += sum(len(c) for c in completion_ids)
        counts["trained_tokens"] += sum(len(p) + len(c) for p, c in zip(prompt_ids, completion_ids))
        return completion_ids, logprobs

    def generate_and_score(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return orig_score(*a, **kw)
        finally:
            timings["score_s"] += time.perf_counter() - t0

    trainer._generate_single_turn = generate_single_turn
    trainer._generate_and_score_completions = generate_and_score
    steps: list[dict[str, Any]] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *_a: Any, **_k: Any) -> None:
            self.t0, self.c0 = time.perf_counter(), time.process_time()
            for key in timings:
                timings[key] = 0.0
            for key in counts:
                counts[key] = 0

        def on_step_end(self, *_a: Any, **_k: Any) -> None:
            step_s, cpu_s = time.perf_counter() - self.t0, time.process_time() - self.c0
            steps.append({"step_s": step_s, "cpu_s": cpu_s, "generation_s": timings["generation_s"],
                          "rollout_s": timings["score_s"], "update_s": step_s - timings["score_s"], **counts})

    trainer.add_callback(StepTimer())
    trainer.train()
    rewards = [x.get("reward") for x in trainer.state.log_history if "reward" in x]
    for row, reward in zip(steps, rewards):
        row["reward_mean"] = reward
    from importlib.metadata import version

    return {"steps": steps, "trl": version("trl")}


# --------------------------------------------------------------------------------------------------- driver

def summarise(side: dict[str, Any]) -> dict[str, Any]:
    steps = side["steps"]
    measured = steps[1:] if len(steps) > 1 else steps
    mean = {k: sum(s[k] for s in measured) / len(measured) for k in
            ("step_s", "cpu_s", "generation_s", "rollout_s", "update_s", "generated_tokens", "trained_tokens")}
    return {
        "first_step_s": steps[0]["step_s"],
        "measured_steps": len(measured),
        "seconds_per_step": mean["step_s"],
        "best_seconds_per_step": min(s["step_s"] for s in measured),
        "cpu_seconds_per_step": mean["cpu_s"],
        "best_cpu_seconds_per_step": min(s["cpu_s"] for s in measured),
        "generation_s_per_step": mean["generation_s"],
        "rollout_s_per_step": mean["rollout_s"],
        "update_s_per_step": mean["update_s"],
        "generated_tokens_per_step": mean["generated_tokens"],
        "trained_tokens_per_step": mean["trained_tokens"],
        "generation_tokens_per_s": mean["generated_tokens"] / mean["generation_s"],
        "update_tokens_per_s": mean["trained_tokens"] / mean["update_s"],
        "generated_tokens_per_step_second": mean["generated_tokens"] / mean["step_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="training steps per side; the first is warm-up")
    parser.add_argument("--prompts", type=int, default=8, help="Countdown problems per step (ragen env groups)")
    parser.add_argument("--generations", type=int, default=8, help="samples per problem (ragen group size)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--micro", type=int, default=16, help="samples per forward/backward pass")
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--threads", type=int, default=None, help="torch threads on both sides (default: cores)")
    parser.add_argument("--order", default="ragen,trl", help="order the sides run in (default ragen,trl)")
    parser.add_argument("--old-logprobs", choices=["rollout", "recompute"], default="rollout",
                        help="ragen's trainer.old_logprobs (default rollout: no extra pass, like TRL here)")
    parser.add_argument("--json", default="bench/results/trl_grpo.json")
    parser.add_argument("--side", choices=["ragen", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--side-json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if (args.prompts * args.generations) % args.micro:
        parser.error("--micro must divide --prompts x --generations")
    if importlib.util.find_spec("trl") is None:
        print(f"bench/trl_grpo.py needs TRL, which ragen does not depend on: {INSTALL}", file=sys.stderr)
        return 1

    import torch

    threads = args.threads or torch.get_num_threads()
    if args.side:
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        from ragen_plugins_torch.models import build_tiny_model

        folder = str(build_tiny_model())
        with tempfile.TemporaryDirectory(prefix=f"bench-{args.side}-") as tmp:
            fn = run_ragen if args.side == "ragen" else run_trl
            out = fn(args, folder, Path(tmp))
        out["machine"] = machine()
        Path(args.side_json).write_text(json.dumps(out))
        return 0

    sides: dict[str, Any] = {}
    common = ["--steps", str(args.steps), "--prompts", str(args.prompts), "--generations", str(args.generations),
              "--max-new-tokens", str(args.max_new_tokens), "--micro", str(args.micro), "--lr", str(args.lr),
              "--threads", str(threads), "--old-logprobs", args.old_logprobs]
    with tempfile.TemporaryDirectory(prefix="bench-trl-grpo-") as tmp:
        for side in [s.strip() for s in args.order.split(",")]:
            side_json = Path(tmp) / f"{side}.json"
            print(f"running {side} ({args.steps} steps) ...", file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, __file__, "--side", side, "--side-json", str(side_json), *common],
                                  check=False, stdout=subprocess.DEVNULL)
            if proc.returncode:
                print(f"the {side} side failed (exit status {proc.returncode})", file=sys.stderr)
                return proc.returncode
            sides[side] = json.loads(side_json.read_text())
    summary = {name: summarise(side) for name, side in sides.items()}
    ragen, trl = summary["ragen"], summary["trl"]
    ratio = ragen["seconds_per_step"] / trl["seconds_per_step"]
    ratios = {"mean_wall": ratio, "best_wall": ragen["best_seconds_per_step"] / trl["best_seconds_per_step"],
              "mean_cpu": ragen["cpu_seconds_per_step"] / trl["cpu_seconds_per_step"],
              "best_cpu": ragen["best_cpu_seconds_per_step"] / trl["best_cpu_seconds_per_step"]}
    result = {
        "bench": "trl_grpo",
        "command": "python bench/trl_grpo.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "setup": {"model": "ragen tiny (build_tiny_model)", "env": "countdown (single turn)", "prompts": args.prompts,
                  "generations": args.generations, "batch": args.prompts * args.generations,
                  "max_new_tokens": args.max_new_tokens, "micro_batch": args.micro, "steps": args.steps,
                  "lr": args.lr, "threads": threads, "dtype": "float32", "device": "cpu",
                  "ragen_old_logprobs": args.old_logprobs,
                  "trl": sides["trl"].get("trl")},
        "ragen": {**ragen, "per_step": sides["ragen"]["steps"], "machine": sides["ragen"]["machine"]},
        "trl": {**trl, "per_step": sides["trl"]["steps"], "machine": sides["trl"]["machine"]},
        "ratio_ragen_over_trl_seconds_per_step": ratio,
        "ratios_ragen_over_trl": ratios,
    }
    rows = [("seconds / step (mean)", "seconds_per_step", "{:.3f}"),
            ("seconds / step (best step)", "best_seconds_per_step", "{:.3f}"),
            ("process CPU seconds / step (mean)", "cpu_seconds_per_step", "{:.3f}"),
            ("process CPU seconds / step (best step)", "best_cpu_seconds_per_step", "{:.3f}"),
            ("  generation s / step", "generation_s_per_step", "{:.3f}"),
            ("  rollout s / step (gen + prompts + reward)", "rollout_s_per_step", "{:.3f}"),
            ("  update s / step", "update_s_per_step", "{:.3f}"),
            ("generated tokens / step", "generated_tokens_per_step", "{:.0f}"),
            ("trained tokens / step", "trained_tokens_per_step", "{:.0f}"),
            ("generation tokens / s", "generation_tokens_per_s", "{:.1f}"),
            ("update tokens / s", "update_tokens_per_s", "{:.1f}"),
            ("generated tokens / step second", "generated_tokens_per_step_second", "{:.1f}"),
            ("first (warm-up) step s", "first_step_s", "{:.3f}")]
    print(f"ragen vs TRL {result['setup']['trl']} GRPOTrainer: tiny model, Countdown, {args.prompts} prompts x "
          f"{args.generations} generations, <= {args.max_new_tokens} new tokens, micro-batch {args.micro}, "
          f"{threads} threads, float32 CPU; mean of {ragen['measured_steps']} steps after a warm-up step")
    print(f"{'':44s} {'ragen':>10s} {'TRL':>10s} {'ragen/TRL':>10s}")
    for label, key, fmt in rows:
        r, t = ragen[key], trl[key]
        print(f"{label:44s} {fmt.format(r):>10s} {fmt.format(t):>10s} {r / t if t else float('nan'):10.2f}")
    loads = [sides[s]["machine"]["load_avg_1_5_15"][0] for s in sides]
    print(f"ratio ragen / TRL time per step: {ratio:.2f} (mean), {ratios['best_wall']:.2f} (best step), "
          f"{ratios['mean_cpu']:.2f} (CPU time, mean)  (load avg after each side: "
          f"{', '.join(f'{s} {v:.2f}' for s, v in zip(sides, loads))})")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
