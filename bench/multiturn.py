"""Multi-turn generation: tokens prefilled and seconds per turn in the ``full`` context mode, before and after the
prefix store.

Usage: python bench/multiturn.py [--turns 5] [--groups 8] [--group-size 8] [--max-new-tokens 24] [--threads N]
                                 [--env sokoban] [--json bench/results/multiturn.json]

One rollout of ``--groups`` x ``--group-size`` Sokoban episodes (6x6, one box; the tiny model, untrained, so every
episode plays all ``--turns`` turns: an answer that is not a valid move costs a format penalty, not the episode) in
the ``full`` context mode, where turn k's prompt is the whole conversation so far. Three samplers, the same seed:

- ``generate``: transformers' ``generate`` with no prefix store (``HFPolicy(decoder="hf", prefix_cache_mb=0)``: the
  sampler before the native loop; every turn prefills the whole conversation again);
- ``native``: the native sampling loop, no store (``prefix_cache_mb=0``);
- ``native+store``: the default (``HFPolicy()``), where turn k continues from turn k-1's cache.

For each turn (one ``generate`` call of the lock-step driver) the table prints the mean prompt length, the tokens run
through the model for the prompts (``HFPolicy.prefilled_tokens``: a group's shared first prompt and the batch's
common prefix count once) and the seconds of the call; then the totals, and whether the three produced the same
trajectories token for token (they should: the store changes log-probs only by float round-off). The load average
is printed at the start and the end; compare figures from one run only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from _machine import machine  # noqa: E402  (bench/_machine.py)

#: the sampler before the native loop (``generate``) and the native loop without and with the store
ARMS: dict[str, dict[str, Any]] = {
    "generate": {"decoder": "hf", "prefix_cache_mb": 0},
    "native": {"prefix_cache_mb": 0},
    "native+store": {}}


def run_arm(args: argparse.Namespace, model: Any, tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """One rollout with an ``HFPolicy(**options)``: per-call prefilled tokens, prompt lengths and seconds."""
    import torch

    from ragen_core.config import RolloutConfig
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.starpo.chat import ChatCodec
    from ragen_core.starpo.rollout import make_episodes, run_lockstep
    from ragen_plugins_torch.policy import HFPolicy

    registries = collect_registries(build_plugin_manager())
    config = RolloutConfig(max_turn=args.turns, max_actions_per_turn=2, max_new_tokens=args.max_new_tokens,
                           context_mode="full", temperature=1.0)
    episodes = make_episodes(registries.envs, [(args.env, args.groups, {})], seeds=list(range(args.groups)),
                             group_size=args.group_size, config=config, codec=ChatCodec(tokenizer))
    policy = HFPolicy(model, tokenizer, **options)
    calls: list[dict[str, Any]] = []
    generate = policy.generate

    def timed(requests: list[Any]) -> Any:
        before, t0 = policy.prefilled_tokens, time.perf_counter()
        out = generate(requests)
        calls.append({"rows": len(requests), "seconds": time.perf_counter() - t0,
                      "prefilled_tokens": policy.prefilled_tokens - before,
                      "prompt_tokens_mean": sum(len(r.prompt_ids) for r in requests) / len(requests),
                      "generated_tokens": sum(len(r.token_ids) for r in out)})
        return out

    policy.generate = timed  # type: ignore[method-assign]
    torch.manual_seed(0)
    t0 = time.perf_counter()
    batch = run_lockstep(episodes, policy)
    wall = time.perf_counter() - t0
    tokens = [[list(t.response_ids) for t in traj.turns] for traj in batch]
    return {"calls": calls, "rollout_s": wall, "tokens": tokens,
            "store": None if policy.store is None else {"hits": policy.store.hits, "misses": policy.store.misses,
                                                         "reused_tokens": policy.store.reused_tokens}}


def print_table(results: dict[str, dict[str, Any]], turns: int) -> None:
    names = list(results)
    head = f"{'turn':>4} {'rows':>5} {'prompt':>7}" + "".join(f" {n + ' prefilled':>22} {n + ' s':>15}"
                                                            for n in names)
    print(head)
    for k in range(turns):
        if any(k >= len(results[n]["calls"]) for n in names):
            break
        row = [results[n]["calls"][k] for n in names]
        line = f"{k + 1:>4} {row[0]['rows']:>5} {row[0]['prompt_tokens_mean']:>7.0f}"
        for c in row:
            line += f" {c['prefilled_tokens']:>22,} {c['seconds']:>15.3f}"
        print(line)
    line = f"{'all':>4} {'':>5} {'':>7}"
    for n in names:
        calls = results[n]["calls"]
        line += f" {sum(c['prefilled_tokens'] for c in calls):>22,} {sum(c['seconds'] for c in calls):>15.3f}"
    print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--json", default="bench/results/multiturn.json")
    args = parser.parse_args(argv)

    import torch

    from ragen_plugins_torch.models import build_tiny_model, load_model_and_tokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    start = machine()
    print(f"load average at start: {start['load_avg_1_5_15'][0]:.2f}; torch threads {start['torch_threads']}")
    model, tokenizer = load_model_and_tokenizer(str(build_tiny_model()))
    results = {name: run_arm(args, model, tokenizer, options) for name, options in ARMS.items()}
    same = all(results[n]["tokens"] == results["generate"]["tokens"] for n in results)
    end = machine()
    print(f"{args.env}, full context, {args.groups} groups x {args.group_size}, {args.turns} turns, <= "
          f"{args.max_new_tokens} new tokens, tiny model")
    print_table(results, args.turns)
    base, new = results["generate"], results["native+store"]
    prefill_ratio = sum(c["prefilled_tokens"] for c in base["calls"]) / max(
        1, sum(c["prefilled_tokens"] for c in new["calls"]))
    gen_ratio = sum(c["seconds"] for c in base["calls"]) / sum(c["seconds"] for c in new["calls"])
    print(f"prefilled tokens generate / native+store: {prefill_ratio:.2f}x; generation seconds: {gen_ratio:.2f}x; "
          f"store: {new['store']}; same trajectories token for token: {same}")
    print(f"load average at end: {end['load_avg_1_5_15'][0]:.2f}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "bench": "multiturn", "command": "python bench/multiturn.py " + " ".join(argv or sys.argv[1:]),
        "setup": vars(args), "machine_start": start, "machine_end": end, "same_trajectories": same,
        "prefill_ratio": prefill_ratio, "generation_seconds_ratio": gen_ratio,
        "arms": {n: {k: v for k, v in r.items() if k != "tokens"} for n, r in results.items()}}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
