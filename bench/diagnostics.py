"""Cost of RAGEN-2's pieces relative to a training step of the tiny model: the collapse (MI) cross-scoring at
RAGEN's defaults (64 pairs, every 5 steps; target ≤ 10% of step time, amortised), and the filter and estimator
(target ≤ 1% of step time each).

Usage: python bench/diagnostics.py [--steps 5] [--every 5] [--pairs 64] [--compare K] [--threads N] [--json OUT]
                                   [key=value ...]

``ragen train`` (the torch trainer's embedded preset: tiny model, Sokoban 8 groups x 8, warm-started for 40 steps so
the policy writes ``<think>…</think>`` reasoning to score) runs in this process for ``--steps`` steps with
``diagnostics=[{name: collapse, pairs: 64}]``, ``trainer.diagnostics_every=5`` (so steps 1 and 5 compute it) and
``filter=top_p`` (0.9). Wrappers installed here (nothing in ragen is changed) time, on the real batches of the run:

- each diagnostic's ``compute`` per diagnostic step, and within it the scorer's ``score_matrix`` / ``score`` calls
  (the cross-scoring proper; the rest is finding the reasoning and sampling the pairs);
- the filter's ``select`` and the estimator's ``compute``, every step.

``--compare K`` also scores, at each diagnostic step, the first K prompts of each family pair by pair through
the policy's ``score`` (the path of scorers without ``score_matrix``, and the only one before it existed): its time
extrapolated to all the prompts (the pairs are independent, so the cost is linear in the prompts) and the largest
difference from ``score_matrix``'s ℓ. That time is left out of the figures above.

Step time is the trainer's ``timing_s/step`` minus the diagnostics it contains, averaged over the steps; the
diagnostics' amortised share is (mean time per diagnostic step / every) / step time. Validation is skipped (it is
outside ``timing_s/step`` and would only lengthen the bench). The load average is recorded with the figures: on a
shared machine every figure moves with it.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))


class Timers:
    """Seconds spent in wrapped calls, by label and training step (step 0: outside a step)."""

    def __init__(self) -> None:
        self.step = 0
        self.seconds: dict[str, dict[int, float]] = {}
        self.calls: dict[str, dict[int, int]] = {}
        self._wrapped: set[tuple[type, str]] = set()
        self._inside: set[str] = set()  # labels being timed (a wrapped call inside another of its label counts once)

    def add(self, label: str, seconds: float) -> None:
        self.seconds.setdefault(label, {}).setdefault(self.step, 0.0)
        self.seconds[label][self.step] += seconds
        self.calls.setdefault(label, {}).setdefault(self.step, 0)
        self.calls[label][self.step] += 1

    def wrap(self, cls: type, method: str, label: str) -> None:
        """Time ``cls.method`` (once per class and method) under ``label``."""
        if (cls, method) in self._wrapped or not callable(getattr(cls, method, None)):
            return
        self._wrapped.add((cls, method))
        orig = getattr(cls, method)
        timers = self

        def timed(self_: Any, *args: Any, **kwargs: Any) -> Any:
            if label in timers._inside:
                return orig(self_, *args, **kwargs)
            timers._inside.add(label)
            t0 = time.perf_counter()
            try:
                return orig(self_, *args, **kwargs)
            finally:
                timers._inside.discard(label)
                timers.add(label, time.perf_counter() - t0)

        timed.__signature__ = inspect.signature(orig)  # type: ignore[attr-defined]  # callers inspect it
        setattr(cls, method, timed)

    def per_step(self, label: str) -> dict[int, float]:
        return {s: v for s, v in self.seconds.get(label, {}).items() if s > 0}

    def install(self, compare: int = 0) -> None:
        from ragen_plugins_diagnostics.collapse import Collapse
        from ragen_plugins_torch.policy import HFPolicy
        from ragen_plugins_torch.trainer import TorchTrainer

        timers = self
        self.compared: list[dict[str, Any]] = []
        if compare:
            orig_cross = Collapse._cross_score

            def _cross_score(diag: Any, scorer: Any, zs: Any, prompts: Any) -> Any:
                ell = orig_cross(diag, scorer, zs, prompts)
                k = min(compare, len(prompts))
                timers._inside.add("scoring")  # not the diagnostic's own scoring: kept out of that label
                t0 = time.perf_counter()
                try:
                    pairs = orig_cross(diag, _PairsOnly(scorer), zs, prompts[:k])
                finally:
                    seconds = time.perf_counter() - t0
                    timers._inside.discard("scoring")
                timers.add("compare", seconds)
                timers.compared.append({
                    "step": timers.step, "pairs": len(zs), "prompts": len(prompts), "compared_prompts": k,
                    "pair_path_seconds": seconds, "pair_path_seconds_all_prompts": seconds * len(prompts) / k,
                    "max_abs_difference": float(abs(pairs - ell[:, :k]).max()),
                    "max_abs_log_prob": float(abs(ell).max())})
                return ell

            Collapse._cross_score = _cross_score
        orig_setup, orig_step = TorchTrainer._setup, TorchTrainer._step

        def _setup(trainer: Any, run: Any) -> None:
            orig_setup(trainer, run)
            for name, diag in trainer.diagnostics:
                timers.wrap(type(diag), "compute", f"diagnostic:{name}")
            if trainer.filter is not None:
                timers.wrap(type(trainer.filter), "select", "filter")
                timers.wrap(type(trainer.filter), "collect", "filter")
            timers.wrap(type(trainer.estimator), "compute", "estimator")

        def _step(trainer: Any, run: Any, step: int, *args: Any, **kwargs: Any) -> Any:
            timers.step = step
            try:
                return orig_step(trainer, run, step, *args, **kwargs)
            finally:
                timers.step = 0

        TorchTrainer._setup, TorchTrainer._step = _setup, _step
        TorchTrainer._validate = lambda trainer, run: {}  # outside the step's timing; only lengthens the bench
        TorchTrainer._log_validation = lambda trainer, run, step: {}
        self.wrap(HFPolicy, "score_matrix", "scoring")
        self.wrap(HFPolicy, "score", "scoring")


class _PairsOnly:
    """The policy seen without ``score_matrix``: the diagnostic scores pair by pair through ``score``."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.tokenizer = policy, policy.tokenizer

    def score(self, prompts: Any, continuations: Any, batch_size: int = 16) -> Any:
        return self.policy.score(prompts, continuations, batch_size=batch_size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--every", type=int, default=5, help="trainer.diagnostics_every (RAGEN: 5)")
    parser.add_argument("--pairs", type=int, default=64, help="collapse pairs per family (RAGEN: 64)")
    parser.add_argument("--compare", type=int, default=0, metavar="K",
                        help="also time the pair-by-pair path on K prompts per family (extrapolated; default off)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, the core count)")
    parser.add_argument("--out", default="bench/results/diagnostics", help="the run directory")
    parser.add_argument("--json", default="bench/results/diagnostics.json")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from _machine import mark_bench_dir, replace_bench_dir

    from ragen_core.cli import run_trainer

    run_dir = Path(args.out)
    replace_bench_dir(run_dir)  # only an earlier run of a bench is replaced, never other data
    overrides = [f"trainer.steps={args.steps}", "trainer.val_every=0", "trainer.save_every=0",
                 "trainer.warm_start_steps=40", "trainer.dynamics_steps=0", f"trainer.diagnostics_every={args.every}",
                 f"diagnostics=[{{name: collapse, pairs: {args.pairs}}}]", "filter=top_p", "filter.value=0.9",
                 *args.overrides]
    load_before = os.getloadavg()
    started = time.perf_counter()
    timers = Timers()
    timers.install(args.compare)
    with contextlib.redirect_stdout(io.StringIO()):
        run_trainer("train", tuple(overrides), str(run_dir))
    mark_bench_dir(run_dir)
    wall = time.perf_counter() - started
    load_after = os.getloadavg()

    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = {int(x["step"]): x for x in lines if "timing_s/step" in x}
    compare = timers.per_step("compare")
    diag_all = timers.per_step("diagnostic:collapse")  # includes the comparison, when asked
    diag = {s: v - compare.get(s, 0.0) for s, v in diag_all.items()}
    scoring = timers.per_step("scoring")
    filt, est = timers.per_step("filter"), timers.per_step("estimator")
    plain = [x["timing_s/step"] - diag_all.get(s, 0.0) for s, x in steps.items()]
    step_s = sum(plain) / len(plain)
    diag_steps = sorted(diag)
    mi_s = sum(diag.values()) / len(diag) if diag else 0.0
    scoring_s = sum(scoring.get(s, 0.0) for s in diag_steps) / len(diag) if diag else 0.0
    filter_s = sum(filt.values()) / len(steps)
    est_s = sum(est.values()) / len(steps)
    families = {}
    for s in diag_steps:
        for fam in ("first_turn", "trajectory"):
            pairs, prompts = (steps[s].get(f"collapse/{fam}/num_pairs", 0.0),
                              steps[s].get(f"collapse/{fam}/num_prompts", 0.0))
            families.setdefault(fam, []).append({"step": s, "pairs": int(pairs), "prompts": int(prompts),
                                                 "scored": int(pairs * prompts)})
    result: dict[str, Any] = {
        "steps": len(steps), "diagnostic_steps": diag_steps, "every": args.every, "pairs": args.pairs,
        "step_seconds_without_diagnostics": step_s,
        "step_seconds_each": {s: x["timing_s/step"] for s, x in steps.items()},
        "mi_seconds_per_diagnostic_step": mi_s,
        "mi_seconds_each": diag,
        "mi_scoring_seconds_per_diagnostic_step": scoring_s,
        "mi_share_per_diagnostic_step": mi_s / step_s,
        "mi_share_amortised": mi_s / args.every / step_s,
        "filter_seconds_per_step": filter_s, "filter_share": filter_s / step_s,
        "estimator_seconds_per_step": est_s, "estimator_share": est_s / step_s,
        "scored_pairs": families,
        "pair_path_comparison": timers.compared,
        "targets": {"mi_share_amortised": 0.10, "filter_share": 0.01, "estimator_share": 0.01},
        "machine": {"load_avg_1_5_15_before": list(load_before), "load_avg_1_5_15_after": list(load_after),
                    "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                    "python": platform.python_version()},
        "wall_seconds": wall,
        "command": "python bench/diagnostics.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "run_dir": str(run_dir),
    }

    def pct(x: float) -> str:
        return f"{100 * x:.2f}%"

    rows = [
        ("training step (without diagnostics)", f"{step_s:.2f} s", "", ""),
        (f"MI cross-scoring, per diagnostic step ({args.pairs} pairs)", f"{mi_s:.2f} s", pct(mi_s / step_s), ""),
        ("  of which the scorer's calls", f"{scoring_s:.2f} s", pct(scoring_s / step_s), ""),
        (f"MI amortised (every {args.every} steps)", f"{mi_s / args.every:.2f} s", pct(mi_s / args.every / step_s),
         "≤ 10%"),
        ("filter (top_p 0.9), per step", f"{filter_s * 1e3:.3f} ms", pct(filter_s / step_s), "≤ 1%"),
        ("estimator, per step", f"{est_s * 1e3:.3f} ms", pct(est_s / step_s), "≤ 1%"),
    ]
    print(f"{'':52s} {'time':>12s} {'of a step':>10s} {'target':>7s}")
    for label, t, share, target in rows:
        print(f"{label:52s} {t:>12s} {share:>10s} {target:>7s}")
    if timers.compared:
        per_step: dict[int, float] = {}
        for c in timers.compared:
            per_step[c["step"]] = per_step.get(c["step"], 0.0) + c["pair_path_seconds_all_prompts"]
        pair_s = sum(per_step.values()) / len(per_step)
        result["pair_path_seconds_per_diagnostic_step"] = pair_s
        result["pair_path_share_amortised"] = pair_s / args.every / step_s
        worst = max(c["max_abs_difference"] for c in timers.compared)
        result["pair_path_max_abs_difference"] = worst
        print(f"{'pair-by-pair path (score), per diagnostic step':52s} {pair_s:>10.2f} s {pct(pair_s / step_s):>10s}")
        print(f"{'  amortised':52s} {pair_s / args.every:>10.2f} s {pct(pair_s / args.every / step_s):>10s}   "
              f"(extrapolated from {args.compare} prompts per family; max |Δℓ| vs score_matrix {worst:.1e})")
    for fam, items in families.items():
        print(f"  {fam}: " + ", ".join(f"step {i['step']}: {i['pairs']} pairs x {i['prompts']} prompts" for i in items))
    print(f"steps {len(steps)} (diagnostics at {diag_steps}); load avg before {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f} on {os.cpu_count()} cores; torch threads {torch.get_num_threads()}; "
          f"wall {wall:.0f} s")
    (run_dir / "bench.json").write_text(json.dumps(result, indent=2))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out} (and {run_dir / 'bench.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
