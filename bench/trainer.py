"""Native trainer throughput on this machine: generation tokens/s, update tokens/s, the share of rollout wall time
spent outside the model (env steps, prompt building, parsing) — target ≤ 5% — and model FLOP utilisation (MFU)
against this CPU's measured float32 matmul peak.

Usage: python bench/trainer.py [--steps 3] [--threads N] [--peak-size 1024] [--json OUT] [key=value ...]

``ragen train`` (the torch trainer's embedded preset, ``cpu_default.yaml``; no warm-start, no checkpoints)
runs in this process for ``--steps`` steps; the run directory is ``--out``. The figures from its ``metrics.jsonl``
are as before. For MFU, this process also records (wrappers here only, nothing in ragen is changed) the shape of
every training-step ``generate`` call (each row's prompt and generated length) and every update's samples (length,
response tokens), and counts FLOPs from the model config:

- decoder, per token fed: 2·N (N = weights of the decoder's linear layers) + 4·L·d·c attention (QKᵀ and AV over
  its c visible positions, L layers, d = heads x head dim), summed exactly over the real (unpadded) positions;
- output layer: 2·d·V where logits are made: generation at the last prompt position and each fed generated token;
  the update only at response tokens (the trainer's masked head);
- generation: one forward of each row's prompt and generated tokens but the last (KV cache);
- update: the no-grad forward for the old log-probs (1x, unless ``trainer.old_logprobs: rollout`` takes the
  sampler's) + forward and backward of the loss (3x) per PPO epoch (+1x for a KL reference model); a critic, when
  there is one, is not counted. Each sample's whole sequence is counted, though the trainer runs a group's shared
  prompt once (``grouped_logprobs``), so the update's MFU can pass 100%: it is the work a plain per-sample pass does
  per second of the trainer's.

Useful FLOPs (padding and rows that finished early are not counted) / measured time / peak = MFU. The brief
6·N (update) and 2·N (generation) rule with N = all parameters, attention excluded, is reported alongside.
The peak is the best of repeated ``torch.matmul`` of two float32 ``--peak-size`` square matrices with the same
thread count, measured before and after the run (machine load lowers both).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from _machine import machine, mark_bench_dir, replace_bench_dir  # noqa: E402  (bench/_machine.py)


def matmul_peak(n: int = 1024, seconds: float = 3.0) -> float:
    """Best float32 matmul rate (FLOP/s) of ``n x n`` by ``n x n`` over about ``seconds``, in bursts of 5."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    for _ in range(2):
        torch.matmul(a, b, out=out)
    best, start = 0.0, time.perf_counter()
    while time.perf_counter() - start < seconds or best == 0.0:
        t0 = time.perf_counter()
        for _ in range(5):
            torch.matmul(a, b, out=out)
        best = max(best, 5 * 2 * n**3 / (time.perf_counter() - t0))
    return best


def model_shape(model: Any) -> dict[str, Any]:
    """What the FLOP count needs from the model: linear weights of the decoder, layers, attention width, vocab."""
    import torch

    cfg = model.config
    decoder = model.get_decoder()
    linear = sum(m.weight.numel() for m in decoder.modules() if isinstance(m, torch.nn.Linear))
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "decoder_linear_weights": linear,
        "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "heads": cfg.num_attention_heads,
        "kv_heads": getattr(cfg, "num_key_value_heads", cfg.num_attention_heads), "head_dim": head_dim,
        "attention_width": cfg.num_attention_heads * head_dim, "intermediate": getattr(cfg, "intermediate_size", None),
        "vocab": cfg.vocab_size, "tied_embeddings": bool(getattr(cfg, "tie_word_embeddings", False)),
    }


def decoder_flops(shape: dict[str, Any], tokens: int, first_context: int = 1) -> float:
    """Forward FLOPs of the decoder for ``tokens`` consecutive positions whose visible context runs from
    ``first_context`` to ``first_context + tokens - 1``."""
    if tokens <= 0:
        return 0.0
    last = first_context + tokens - 1
    contexts = (first_context + last) * tokens / 2
    return tokens * 2.0 * shape["decoder_linear_weights"] + 4.0 * shape["layers"] * shape["attention_width"] * contexts


def head_flops(shape: dict[str, Any], positions: int) -> float:
    return 2.0 * shape["hidden"] * shape["vocab"] * positions


class Recorder:
    """Shapes of training-step generation calls and updates, recorded through class-level wrappers."""

    def __init__(self) -> None:
        self.generate: list[dict[str, Any]] = []  # per call: prompt lengths, generated lengths, padded shape
        self.updates: list[list[tuple[int, int]]] = []  # per step: (length, response tokens) of each sample
        self.recording = False

    def install(self) -> None:
        from ragen_plugins_torch.policy import HFPolicy
        from ragen_plugins_torch.trainer import TorchTrainer

        rec = self
        orig_generate, orig_update = HFPolicy._generate, TorchTrainer._update
        orig_step, orig_validate = TorchTrainer._step, TorchTrainer._validate

        def _generate(policy: Any, reqs: list[Any]) -> list[Any]:
            results = orig_generate(policy, reqs)
            if rec.recording:
                rec.generate.append({"prompts": [len(r.prompt_ids) for r in reqs],
                                     "generated": [len(r.token_ids) for r in results],
                                     "max_new_tokens": reqs[0].max_new_tokens})
            return results

        def _update(trainer: Any, samples: list[Any], *args: Any, **kwargs: Any) -> Any:
            if rec.recording:
                rec.updates.append([(len(s.input_ids), int(sum(s.response_mask))) for s in samples])
            return orig_update(trainer, samples, *args, **kwargs)

        def _step(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            rec.recording = True
            try:
                return orig_step(trainer, *args, **kwargs)
            finally:
                rec.recording = False

        def _validate(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            was, rec.recording = rec.recording, False  # validation is outside the step's timings
            try:
                return orig_validate(trainer, *args, **kwargs)
            finally:
                rec.recording = was

        HFPolicy._generate, TorchTrainer._update = _generate, _update
        TorchTrainer._step, TorchTrainer._validate = _step, _validate


def use_generate() -> None:
    """Make every ``HFPolicy`` of this process the sampler before the native loop: transformers' ``generate``, no
    prefix store."""
    import functools

    from ragen_plugins_torch.policy import HFPolicy

    init = HFPolicy.__init__

    @functools.wraps(init)
    def hf_init(policy: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.update(decoder="hf", prefix_cache_mb=0)
        init(policy, *args, **kwargs)

    HFPolicy.__init__ = hf_init  # type: ignore[method-assign]


def generation_flops(shape: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, float]:
    """Useful FLOPs (real positions only) and executed FLOPs (the padded batch for every decoding step)."""
    useful = executed = 0.0
    for call in calls:
        width, steps = max(call["prompts"]), max(call["generated"], default=0)
        for p, g in zip(call["prompts"], call["generated"]):
            useful += decoder_flops(shape, p + max(g - 1, 0)) + head_flops(shape, g)
        rows = len(call["prompts"])
        executed += rows * (decoder_flops(shape, width + max(steps - 1, 0)) + head_flops(shape, steps))
    return {"useful": useful, "executed": executed}


def update_flops(shape: dict[str, Any], updates: list[list[tuple[int, int]]], *, micro: int, passes: float
                 ) -> dict[str, float]:
    """FLOPs of the updates: ``passes`` forward-equivalents per sample (1 old-log-prob forward + 3 per epoch ...)."""
    useful = executed = 0.0
    for samples in updates:
        for length, resp in samples:
            useful += decoder_flops(shape, length) + head_flops(shape, resp)
        for i in range(0, len(samples), micro):
            chunk = samples[i:i + micro]
            width = max(n for n, _r in chunk)
            executed += len(chunk) * decoder_flops(shape, width) + head_flops(shape, sum(r for _n, r in chunk))
    return {"useful": useful * passes, "executed": executed * passes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default="bench/results/trainer", help="the run directory")
    parser.add_argument("--json", default="bench/results/trainer.json")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, the core count)")
    parser.add_argument("--peak-size", type=int, default=1024, help="matrix size of the matmul peak (default 1024)")
    parser.add_argument("--peak-seconds", type=float, default=3.0)
    parser.add_argument("--decoder", choices=["native", "hf"], default="native",
                        help="the sampler: the native loop with the prefix store (default), or the one before it "
                             "(transformers' generate in torch's threads, no store) for a before/after figure")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from ragen_core.cli import run_trainer

    if args.decoder == "hf":
        use_generate()

    run_dir = Path(args.out)
    replace_bench_dir(run_dir)  # only an earlier run of a bench is replaced, never other data
    overrides = [f"trainer.steps={args.steps}", "trainer.warm_start_steps=0", "trainer.dynamics_steps=0",
                 "trainer.val_every=0",
                 "trainer.save_every=0", *args.overrides]
    load_before = os.getloadavg()
    peak_before = matmul_peak(args.peak_size, args.peak_seconds)
    rec = Recorder()
    rec.install()
    with contextlib.redirect_stdout(io.StringIO()):
        run_trainer("train", tuple(overrides), str(run_dir))
    mark_bench_dir(run_dir)
    peak_after = matmul_peak(args.peak_size, args.peak_seconds)
    peak = max(peak_before, peak_after)

    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "timing_s/gen" in x]
    gen = sum(x["timing_s/gen"] for x in steps)
    env = sum(x["timing_s/env"] for x in steps)
    upd = sum(x["timing_s/update"] for x in steps)
    gen_tokens = sum(x["perf/tokens_per_s"] * x["timing_s/gen"] for x in steps)
    upd_tokens = sum(x.get("perf/update_tokens_per_s", 0.0) * x["timing_s/update"] for x in steps)
    result: dict[str, Any] = {
        "steps": len(steps),
        "generation_tokens_per_s": gen_tokens / gen if gen else 0.0,
        "outside_model_share_of_rollout": env / (gen + env) if gen + env else 0.0,
        "update_tokens_per_s": upd_tokens / upd if upd else 0.0,
        "update_seconds_per_step": upd / len(steps),
        "step_seconds": sum(x["timing_s/step"] for x in steps) / len(steps),
    }

    import yaml

    from ragen_plugins_torch.models import load_model_and_tokenizer

    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    tcfg = config["trainer"]
    model, _tok = load_model_and_tokenizer(tcfg.get("model", "tiny"))
    shape = model_shape(model)
    old_pass = 1 if tcfg.get("old_logprobs", "recompute") == "recompute" else 0  # ``rollout``: the sampler's
    passes = old_pass + 3 * int(tcfg.get("ppo_epochs", 1)) + (1 if tcfg.get("use_kl_loss") else 0)
    g_flops = generation_flops(shape, rec.generate)
    u_flops = update_flops(shape, rec.updates, micro=int(tcfg.get("micro_batch_size", 8)), passes=passes)
    n_all = shape["parameters"]
    naive_gen = 2.0 * n_all * gen_tokens
    naive_upd = 6.0 * n_all * upd_tokens
    result.update({
        "model": shape,
        "peak_flops": peak, "peak_flops_before": peak_before, "peak_flops_after": peak_after,
        "peak_matmul_size": args.peak_size,
        "generation_flops_per_s": g_flops["useful"] / gen if gen else 0.0,
        "generation_mfu": g_flops["useful"] / gen / peak if gen else 0.0,
        "generation_executed_mfu": g_flops["executed"] / gen / peak if gen else 0.0,
        "update_flops_per_s": u_flops["useful"] / upd if upd else 0.0,
        "update_mfu": u_flops["useful"] / upd / peak if upd else 0.0,
        "update_executed_mfu": u_flops["executed"] / upd / peak if upd else 0.0,
        "update_forward_passes_per_sample": passes,
        "naive_generation_mfu_2N": naive_gen / gen / peak if gen else 0.0,
        "naive_update_mfu_6N": naive_upd / upd / peak if upd else 0.0,
        "generate_calls": len(rec.generate),
        "critic_flops_counted": False,
        "machine": {**machine(), "load_avg_1_5_15_before": list(load_before)},
        "command": "python bench/trainer.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "run_dir": str(run_dir),
    })
    for k in ("steps", "generation_tokens_per_s", "outside_model_share_of_rollout", "update_tokens_per_s",
              "update_seconds_per_step", "step_seconds"):
        print(f"{k:36s} {result[k]:12.3f}")
    print(f"\nmodel: {shape['parameters']:,} parameters ({shape['decoder_linear_weights']:,} in decoder linears), "
          f"L={shape['layers']} d={shape['hidden']} V={shape['vocab']}; peak float32 matmul "
          f"{peak / 1e9:.1f} GFLOP/s ({args.peak_size}^3, {torch.get_num_threads()} threads); "
          f"load avg {result['machine']['load_avg_1_5_15'][0]:.2f}")
    print(f"{'phase':12s} {'tokens/s':>10s} {'GFLOP/s':>9s} {'MFU':>7s} {'MFU exec':>9s} {'MFU 2N/6N':>10s}")
    print(f"{'generation':12s} {result['generation_tokens_per_s']:10.1f} "
          f"{result['generation_flops_per_s'] / 1e9:9.3f} {100 * result['generation_mfu']:6.2f}% "
          f"{100 * result['generation_executed_mfu']:8.2f}% {100 * result['naive_generation_mfu_2N']:9.2f}%")
    print(f"{'update':12s} {result['update_tokens_per_s']:10.1f} {result['update_flops_per_s'] / 1e9:9.3f} "
          f"{100 * result['update_mfu']:6.2f}% {100 * result['update_executed_mfu']:8.2f}% "
          f"{100 * result['naive_update_mfu_6N']:9.2f}%")
    (run_dir / "bench.json").write_text(json.dumps(result, indent=2))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out} (and {run_dir / 'bench.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
