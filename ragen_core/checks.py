"""Contract checks that plugin authors run in their own test suites.

``check_env`` verifies the env contract (:mod:`ragen_core.env`); ``check_filter``, ``check_estimator`` and
``check_diagnostic`` verify the component protocols (:mod:`ragen_core.protocols`). Each raises ``AssertionError``
with a message naming the broken rule, and returns nothing on success. They are also exposed by the pytest plugin
``ragen_core.testing``.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ragen_core.env import REQUIRED_INFO_KEYS

__all__ = ["check_diagnostic", "check_env", "check_estimator", "check_filter", "fuzz_env", "hostile_strings"]

_HOSTILE = [
    "", " ", "\n", "\x00", "||", " || || ", "<answer></answer>", "<think>x</think><answer>Up</answer>",
    "</answer><answer>", "Up || Down", "up", "UP", "Left Left Left", "-1", "0", "99999999999999999999",
    "1e309", "nan", "inf", "-inf", "NaN", "None", "null", "[]", "{}", "()", "((((((", "1/0", "0/0", "2**999999",
    "__import__('os').system('echo hi')", "exec" "('1')", "eval" "('1')", "lambda: 1", "\u202e\u0000\ufeff", "🙂" * 50,
    "ⅷ", "١٢٣", "x" * 10_000, "place 10 at row 0 col 0", "R,C,N", "1,1,1", "9,9,9,0", "search[]", "click[]",
    "finish[]", "search[" + "a" * 5000 + "]", "\t\r\n", "'; DROP TABLE x; --", "%s%s%s%n", "../../etc/passwd",
]


def hostile_strings(n: int, seed: int = 0) -> list[str]:
    """``n`` action strings: a fixed hostile list, then seeded random text (printable, unicode, near-valid)."""
    rng = random.Random(seed)
    out = list(_HOSTILE[:n])
    alphabet = string.printable + "äöü√→∞中文🙂\u200b\x00"
    while len(out) < n:
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80))))  # the length is drawn first
    return out


def _as_env(env_or_factory: Any) -> Any:
    return env_or_factory() if callable(env_or_factory) and not hasattr(env_or_factory, "step") else env_or_factory


def _check_step(result: Any, where: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    assert isinstance(result, tuple) and len(result) == 5, f"{where}: step() must return a 5-tuple, got {result!r:.200}"
    obs, reward, terminated, truncated, info = result
    assert isinstance(obs, str), f"{where}: observation must be str, got {type(obs).__name__}"
    assert isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(float(reward)), \
        f"{where}: reward must be a finite number, got {reward!r:.40} ({type(reward).__name__})"
    assert isinstance(terminated, bool) and isinstance(truncated, bool), \
        f"{where}: terminated and truncated must be bool, got {type(terminated).__name__}, {type(truncated).__name__}"
    _check_info(info, where)
    return obs, float(reward), terminated, truncated, info


def _check_info(info: Any, where: str) -> None:
    assert isinstance(info, dict), f"{where}: info must be a dict, got {type(info).__name__}"
    for key in REQUIRED_INFO_KEYS:
        assert key in info, f"{where}: info lacks the required key {key!r} (has {sorted(info)})"
        assert isinstance(info[key], (bool,)) or info[key] in (0, 1), \
            f"{where}: info[{key!r}] must be a bool, got {info[key]!r}"


def check_env(env_or_factory: Any, *, seeds: tuple[int, ...] = (0, 1, 7), n_random_actions: int = 200,
              max_steps: int = 50) -> None:
    """Check that an env follows the ragen env contract.

    :param env_or_factory: an env instance or a zero-argument callable making a fresh one (preferred: lets the
        check compare two independent instances for determinism).
    :param seeds: seeds used for the determinism and rollout checks.
    :param n_random_actions: how many hostile/random action strings to send (none may raise).
    :param max_steps: cap on steps per checked episode.

    Checks: prompt metadata (instruction, action_names, legend, max_actions_per_traj); ``reset`` types and seeded
    determinism (two instances, and twice on one); ``step`` types and the required info keys; invalid actions leave
    the rendered state unchanged; random strings never raise; the same seed and actions replay identically; the
    oracle (if any) proposes actions the env accepts.
    """
    env = _as_env(env_or_factory)
    name = type(getattr(env, "unwrapped", env)).__name__
    names, limit = _check_metadata(env, name)
    other = _as_env(env_or_factory) if callable(env_or_factory) and not hasattr(env_or_factory, "step") else None
    vocab = list(names) if names else ["0", "1", "42", "answer"]
    rng = random.Random(1234)
    for seed in seeds:
        actions = [rng.choice(vocab) for _ in range(min(max_steps, limit))]
        first = _episode(env, name, seed, actions)
        again = _episode(env, name, seed, actions)
        assert first == again, f"{name}: reset(seed={seed}) then the same actions gave a different episode"
        if other is not None:
            assert _episode(other, name, seed, actions) == first, \
                f"{name}: two instances with seed={seed} and the same actions diverged"
        obs, _ = env.reset(seed=seed)
        assert isinstance(env.render(), str), f"{name}.render() must return a str"
    fuzz_env(env, hostile_strings(n_random_actions, seed=seeds[0]), seed=seeds[0])  # never raise; invalid: no change
    _check_oracle(env, name, seeds[0], min(max_steps, limit))


def _check_metadata(env: Any, name: str) -> tuple[Any, int]:
    """The prompt metadata of the contract; returns ``(action_names, max_actions_per_traj)``."""
    import gymnasium

    assert isinstance(env, gymnasium.Env), f"{name} must be a gymnasium.Env"
    base = env.unwrapped
    assert isinstance(instruction := getattr(base, "instruction", None), str) and instruction.strip(), \
        f"{name}.instruction must be a non-empty string"
    names = getattr(base, "action_names", None)
    assert names is None or (isinstance(names, (tuple, list)) and names and all(isinstance(a, str) and a for a in names)), \
        f"{name}.action_names must be None (free-form) or a non-empty sequence of non-empty strings"
    legend = getattr(base, "legend", {})
    assert hasattr(legend, "items") and all(isinstance(k, str) and isinstance(v, str) for k, v in legend.items()), \
        f"{name}.legend must map symbol strings to meaning strings"
    limit = getattr(base, "max_actions_per_traj", None)
    assert isinstance(limit, int) and limit >= 1, f"{name}.max_actions_per_traj must be a positive int"
    return names, limit


def _episode(env: Any, name: str, seed: int, actions: list[str]) -> list[Any]:
    """Reset with ``seed``, play ``actions`` until the episode ends; the trace of observations and steps."""
    obs, info = reset = env.reset(seed=seed)
    assert isinstance(obs, str) and isinstance(info, dict), f"{name}.reset must return (str, dict), got {reset!r:.80}"
    trace: list[Any] = [obs]
    for a in actions:
        step = _check_step(env.step(a), f"{name}.step({a!r:.40})")
        trace.append(step[:4] + (_numeric(step[4]),))
        if step[2] or step[3]:
            break
    return trace


def _check_oracle(env: Any, name: str, seed: int, max_steps: int) -> None:
    """The oracle's proposals (if the env has one) are strings the env accepts as valid."""
    oracle = getattr(env.unwrapped, "oracle_action", None)
    if not callable(oracle):
        return
    env.reset(seed=seed)
    for _ in range(max_steps):
        action = oracle()
        if action is None:
            break
        assert isinstance(action, str), f"{name}.oracle_action() must return a str or None"
        _o, _r, terminated, truncated, info = _check_step(env.step(action), f"{name}.step(oracle {action!r:.40})")
        assert info["action_is_valid"], f"{name}: the oracle's action {action!r:.60} was invalid"
        if terminated or truncated:
            break


def fuzz_env(env: Any, actions: Iterable[Any], *, seed: int = 0, between: Sequence[str] = (),
             check: Callable[[Any, tuple[Any, ...], str], None] | None = None) -> None:
    """Send every one of ``actions`` (any objects: hostile strings, near-valid spellings, non-strings) to ``env``,
    reset with ``seed`` first.

    No step may raise; each returns the contract's types and info keys; an invalid action that does not end the
    episode leaves ``render()`` unchanged. ``check(action, step, before)`` (``before``: the render before the step)
    adds an env's own assertions. After each fuzzed step one of ``between`` (valid actions, in turn) is played, so
    the fuzzed strings meet many states; an episode that ends is reset with the next seed.
    """
    name = type(getattr(env, "unwrapped", env)).__name__
    env.reset(seed=seed)
    for i, action in enumerate(actions):
        for a, fuzzed in ((action, True), (between[i % len(between)], False)) if between else ((action, True),):
            before = env.render()
            try:
                raw = env.step(a)
            except Exception as exc:  # noqa: BLE001 - the point of the check
                raise AssertionError(f"{name}.step({a!r:.60}) raised {type(exc).__name__}: {exc}") from exc
            step = _check_step(raw, f"{name}.step({a!r:.40})")
            if not step[4]["action_is_valid"] and not (step[2] or step[3]):
                assert env.render() == before, f"{name}: invalid action {a!r:.40} changed the state"
            if check is not None and fuzzed:
                check(action, step, before)
            if step[2] or step[3]:
                seed += 1
                env.reset(seed=seed)


def _numeric(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if isinstance(v, (bool, int, float, str))}


def _finite_metrics(metrics: Any, where: str) -> None:
    assert isinstance(metrics, dict), f"{where}: metrics must be a dict"
    for k, v in metrics.items():
        assert isinstance(k, str) and k, f"{where}: metric names must be non-empty strings"
        assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), \
            f"{where}: metric {k!r} must be a finite number, got {v!r}"


def check_filter(filt: Any, *, make_batch: Callable[[int], Any] | None = None, n_batches: int = 30) -> None:
    """Check a rollout filter (see :class:`ragen_core.protocols.RolloutFilter`) on random batches.

    Invariants: ``select(batch)`` returns a :class:`~ragen_core.protocols.FilterResult`; kept ids are group ids of
    the batch, without duplicates; results are deterministic for the same batch; the input batch is not mutated;
    metrics are finite numbers. ``make_batch(seed)`` may supply batches (default: random groups of rewards).
    """
    from ragen_core.data import random_batch
    from ragen_core.protocols import FilterResult

    make = make_batch or (lambda s: random_batch(s))
    where = type(filt).__name__
    for seed in range(n_batches):
        batch = make(seed)
        snapshot = batch.fingerprint()
        result = filt.select(batch)
        assert isinstance(result, FilterResult), f"{where}.select must return a FilterResult, got {type(result).__name__}"
        groups = set(batch.group_ids())
        kept = list(result.kept_groups)
        assert len(kept) == len(set(kept)), f"{where}: kept groups contain duplicates: {kept}"
        assert set(kept) <= groups, f"{where}: kept groups {sorted(set(kept) - groups)} are not in the batch"
        assert batch.fingerprint() == snapshot, f"{where}.select mutated its input batch"
        again = filt.select(make(seed))
        assert list(again.kept_groups) == kept, f"{where}: select is not deterministic for the same batch"
        _finite_metrics(result.metrics, where)


def check_estimator(est: Any, *, n_batches: int = 30) -> None:
    """Check an advantage estimator (see :class:`ragen_core.protocols.Estimator`) on random masked batches.

    Invariants: ``compute(inputs)`` returns an :class:`~ragen_core.protocols.AdvantageOutput` whose ``advantages``
    and ``returns`` have the input shape, are finite, are exactly 0 where ``response_mask`` is 0 (observation and
    padding tokens get no signal); outputs are deterministic and the inputs are not mutated.
    """
    import numpy as np

    from ragen_core.protocols import AdvantageOutput, random_advantage_input

    where = type(est).__name__
    for seed in range(n_batches):
        inp = random_advantage_input(seed, with_values=bool(getattr(est, "needs_critic", False)))
        copy_rewards = inp.token_rewards.copy()
        out = est.compute(inp)
        assert isinstance(out, AdvantageOutput), f"{where}.compute must return AdvantageOutput"
        for field in ("advantages", "returns"):
            arr = np.asarray(getattr(out, field))
            assert arr.shape == inp.token_rewards.shape, f"{where}: {field} shape {arr.shape} != {inp.token_rewards.shape}"
            assert np.isfinite(arr).all(), f"{where}: {field} has non-finite values (seed {seed})"
            assert (arr[inp.response_mask == 0] == 0).all(), f"{where}: {field} non-zero on masked tokens (seed {seed})"
        assert np.array_equal(inp.token_rewards, copy_rewards), f"{where}.compute mutated its inputs"
        again = est.compute(random_advantage_input(seed, with_values=bool(getattr(est, "needs_critic", False))))
        assert np.allclose(np.asarray(again.advantages), np.asarray(out.advantages)), f"{where}: not deterministic"


def check_diagnostic(diag: Any, *, make_context: Callable[[int], Any] | None = None, n_contexts: int = 5) -> None:
    """Check a diagnostic (see :class:`ragen_core.protocols.Diagnostic`).

    Invariants: ``compute(ctx)`` returns a dict of finite numbers whose names are namespaced (``family/name``);
    it is deterministic for the same context; it does not mutate the batch.
    """
    from ragen_core.protocols import random_diagnostic_context

    make = make_context or random_diagnostic_context
    where = type(diag).__name__
    for seed in range(n_contexts):
        ctx = make(seed)
        snapshot = ctx.batch.fingerprint()
        metrics = diag.compute(ctx)
        _finite_metrics(metrics, where)
        assert all("/" in k for k in metrics), f"{where}: metric names must be namespaced like 'family/name'"
        assert ctx.batch.fingerprint() == snapshot, f"{where}.compute mutated the batch"
        again = diag.compute(make(seed))
        assert again.keys() == metrics.keys() and all(
            math.isclose(again[k], metrics[k], rel_tol=1e-9, abs_tol=1e-12) for k in metrics
        ), f"{where}: not deterministic for the same context"
