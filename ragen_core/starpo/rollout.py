"""The StarPO rollout loop, shared by every trainer.

One trajectory's logic is written once, as :meth:`Episode.run`: a generator that yields a
:class:`GenerationRequest` whenever it needs the policy and an :class:`EnvCall` whenever it needs the env, and
returns the finished :class:`~ragen_core.data.Trajectory`. Two drivers run it:

- :func:`run_lockstep` advances many episodes together, batching every waiting episode's request into one
  ``policy.generate`` call (the native trainer) and running env calls in a thread pool when ``env_workers > 1``;
- :func:`run_async` runs one episode against an async ``agenerate`` (an agent-loop worker, an HTTP endpoint).

Policies implement :class:`Policy`: token ids in, sampled ids and their log-probs out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import random
from collections.abc import Callable, Generator, Iterable
from typing import Any, Protocol, cast

import attrs

from ragen_core.data import RolloutBatch, Trajectory, Turn
from ragen_core.starpo.chat import ChatCodec, TextTokenizer, system_message, user_message

__all__ = ["EnvCall", "Episode", "GenerationRequest", "GenerationResult", "Policy", "ScriptedPolicy",
           "extra_round", "is_truncated", "make_episodes", "run_async", "run_lockstep"]


@attrs.frozen
class GenerationRequest:
    """Sample a continuation of ``prompt_ids``; stop at a ``stop`` string, the end token or ``max_new_tokens``.

    ``extends`` and ``extended`` are hints for a policy that keeps the caches of earlier sequences (the torch
    policy's prefix store), never a change of what is sampled: ``extends`` is False when no earlier request's prompt
    and response start this prompt (the policy need not look), ``extended`` is False when no later request of the
    episode will start with this prompt and response (the policy need not keep its cache)."""

    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ("</answer>",)
    episode_id: int = 0
    extends: bool = True
    extended: bool = True


@attrs.frozen
class GenerationResult:
    """Sampled ids (the stop string included), their log-probs, why it stopped (``stop``: a stop string or the end
    token; ``length``: ``max_new_tokens`` reached), and the mean token entropy."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str = "stop"
    mean_entropy: float | None = None


def is_truncated(result: GenerationResult, text: str, stop: tuple[str, ...] = ("</answer>",)) -> bool:
    """Whether a response hit the token limit without closing the answer: ``finish_reason`` is ``length`` and none
    of the ``stop`` strings is in its ``text`` (a response that closed ``</answer>`` on its last allowed token is
    complete)."""
    return result.finish_reason == "length" and not any(s in text for s in stop)


class Policy(Protocol):
    """What the rollout loop needs from a model (each trainer plugin implements it)."""

    tokenizer: Any

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Sample one continuation per request (batched)."""
        ...


@attrs.frozen
class EnvCall:
    """A call into an env that a driver may run in a worker thread. ``run()`` never raises: it returns
    ``(value, None)`` or ``(None, exception)``."""

    fn: Callable[[], Any]

    def run(self) -> tuple[Any, BaseException | None]:
        try:
            return self.fn(), None
        except Exception as exc:  # an env failure is the episode's, reported back to it
            return None, exc


class Episode:
    """One trajectory of one env instance (see the module docstring)."""

    def __init__(self, env: Any, *, name: str, group_id: int, seed: int, episode_id: int, config: Any,
                 codec: ChatCodec, temperature: float | None = None) -> None:
        self.env, self.name, self.group_id, self.seed, self.episode_id = env, name, group_id, seed, episode_id
        self.cfg = config
        self.codec = codec
        self.temperature = config.temperature if temperature is None else temperature

    def run(self) -> Generator[Any, Any, Trajectory]:
        """The episode as a generator (yields requests, receives results, returns the trajectory). The env is closed
        when the episode ends, however it ends (a served env's session, a sandbox); a failing close costs nothing."""
        try:
            return (yield from self._play())
        finally:
            close = getattr(self.env, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()

    def _play(self) -> Generator[Any, Any, Trajectory]:
        cfg, env = self.cfg, self.env
        traj = Trajectory(env=self.name, group_id=self.group_id, seed=self.seed, episode_id=self.episode_id)
        reset, error = yield EnvCall(lambda: env.reset(seed=self.seed))
        if error is not None:
            return self._failed(traj, error)
        obs, _info = reset
        system = system_message(env, max_actions_per_turn=cfg.max_actions_per_turn, action_sep=cfg.action_sep)
        names = tuple(env.action_names) if getattr(env, "action_names", None) else None
        budget = int(env.max_actions_per_traj)
        history: list[tuple[str, str]] = []  # (user text, response text), for the windowed modes
        sequence: list[int] = []
        last_response: list[int] = []
        previous_reward: float | None = None
        previous_invalid = False
        entropies = []
        for turn_no in range(1, cfg.max_turn + 1):
            user = user_message(turn_no, obs, budget, max_new_tokens=cfg.max_new_tokens, think=cfg.think,
                                previous_reward=previous_reward, previous_invalid=previous_invalid)
            turn = Turn(observation=obs, state_key=_state_key(env, obs))
            before, sequence = sequence, self._place_prompt(turn, turn_no, (system, history, user), last_response,
                                                            sequence, traj)
            request = GenerationRequest(
                prompt_ids=tuple(sequence), max_new_tokens=cfg.max_new_tokens, temperature=self.temperature,
                top_p=cfg.top_p, top_k=cfg.top_k, episode_id=self.episode_id,
                extends=bool(before) and sequence[:len(before)] == before, extended=self._extended(turn_no, history))
            result: GenerationResult = yield request
            if result.mean_entropy is not None:
                entropies.append(result.mean_entropy)
            parsed = self._read_response(turn, result, request, min(cfg.max_actions_per_turn, budget), names)
            next_obs, taken, done, error = yield from self._act(turn, parsed.actions, traj)
            if error is not None:
                traj.turns.append(turn)
                return self._failed(traj, error)
            obs = next_obs if taken else obs
            budget -= taken
            traj.turns.append(turn)
            sequence += turn.response_ids
            last_response = turn.response_ids
            history.append((user, turn.response_text))
            previous_reward, previous_invalid = turn.reward, not parsed.actions
            if done or budget <= 0:
                break
        traj.score = sum(t.reward + t.format_penalty for t in traj.turns)
        traj.mean_entropy = sum(entropies) / len(entropies) if entropies else None
        return traj

    def _place_prompt(self, turn: Turn, turn_no: int, context: tuple[str, list[tuple[str, str]], str],
                      last_response: list[int], sequence: list[int], traj: Trajectory) -> list[int]:
        """Set ``turn``'s prompt for the context mode (``context``: the system text, the earlier (user, response)
        pairs and this turn's user text) and return the token sequence the model continues."""
        cfg = self.cfg
        system, history, user = context
        if cfg.context_mode == "full" and turn_no > 1:
            turn.prompt_ids = self.codec.continuation(last_response, user)
            turn.new_segment = False
            if cfg.max_context_tokens and len(sequence) + len(turn.prompt_ids) + cfg.max_new_tokens > \
                    cfg.max_context_tokens:
                turn.prompt_ids, dropped = self._windowed(system, history, user, len(history))
                traj.context_truncations += 1 if dropped else 0
                turn.new_segment = True
                sequence = []
        elif cfg.context_mode == "single_turn":
            turn.prompt_ids = self.codec.prompt(
                [{"role": "system", "content": system}, {"role": "user", "content": _summary(history, user)}])
        else:
            keep = cfg.window - 1 if cfg.context_mode == "limited_multi_turn" else len(history)
            turn.prompt_ids, dropped = self._windowed(system, history, user, keep)
            traj.context_truncations += 1 if dropped else 0
        return [*sequence, *turn.prompt_ids] if not turn.new_segment else list(turn.prompt_ids)

    def _extended(self, turn_no: int, history: list[tuple[str, str]]) -> bool:
        """Whether the next turn's prompt may start with this turn's prompt and response: it follows in the ``full``
        mode, and in ``limited_multi_turn`` while the window still holds every earlier turn."""
        cfg = self.cfg
        if turn_no >= cfg.max_turn:
            return False
        return bool(len(history) + 1 <= cfg.window - 1 if cfg.context_mode == "limited_multi_turn"
                    else cfg.context_mode == "full")

    def _read_response(self, turn: Turn, result: GenerationResult, request: GenerationRequest, max_actions: int,
                       names: tuple[str, ...] | None) -> Any:
        """Record the model's answer on ``turn`` and parse it (at most ``max_actions`` actions)."""
        cfg = self.cfg
        turn.response_ids, turn.logprobs = list(result.token_ids), list(result.logprobs)
        turn.response_text, parsed = self.codec.read_response(turn.response_ids, think=cfg.think,
                                                              action_sep=cfg.action_sep, max_actions=max_actions,
                                                              valid_actions=names)
        turn.truncated = is_truncated(result, turn.response_text, request.stop)
        turn.reasoning, turn.actions = parsed.reasoning, list(parsed.actions)
        turn.format_penalty = cfg.format_penalty if parsed.penalised else 0.0
        return parsed

    def _act(self, turn: Turn, actions: Any, traj: Trajectory
             ) -> Generator[Any, Any, tuple[Any, int, bool, BaseException | None]]:
        """Step the env with the turn's actions until one ends the episode: ``(last observation, actions taken,
        done, the env's error or None)``."""
        obs: Any = None
        for taken, action in enumerate(actions, start=1):
            step, error = yield EnvCall(functools.partial(self.env.step, action))
            if error is not None:
                return obs, taken - 1, False, error
            obs, reward, terminated, truncated, info = step
            turn.reward += float(reward)
            turn.info = dict(info)
            if terminated or truncated:
                traj.success = bool(info.get("success", False)) and bool(terminated) and not truncated
                return obs, taken, True, None
        return obs, len(actions), False, None

    def _windowed(self, system: str, history: list[tuple[str, str]], user: str, keep: int) -> tuple[list[int], bool]:
        """A whole prompt holding the last ``keep`` turns as chat turns; older ones are dropped while the prompt
        and the response budget exceed ``max_context_tokens``. Returns the ids and whether any turn was dropped to
        fit the cap."""
        cap = self.cfg.max_context_tokens
        wanted = keep = max(0, min(keep, len(history)))
        while True:
            messages = [{"role": "system", "content": system}]
            for u, r in history[len(history) - keep:] if keep else []:
                messages += [{"role": "user", "content": u}, {"role": "assistant", "content": self.codec.open_tag + r}]
            ids = self.codec.prompt([*messages, {"role": "user", "content": user}])
            if not cap or keep == 0 or len(ids) + self.cfg.max_new_tokens <= cap:
                return ids, keep < wanted
            keep -= 1

    @staticmethod
    def _failed(traj: Trajectory, error: BaseException) -> Trajectory:
        traj.env_error = f"{type(error).__name__}: {error}"
        traj.success = False
        return traj


def _state_key(env: Any, observation: Any) -> str:
    """The env's ``state_key()``, or without one the observation text (verl-agent's anchor observation): equal
    keys must mean equal states, which an empty key for every turn would claim wrongly (GiGPO would then compare
    every turn of a group with every other)."""
    fn = getattr(env, "state_key", None)
    if not callable(fn):
        return str(observation)
    try:
        return str(fn())
    except Exception:  # a failing state_key: fall back to what the policy sees
        return str(observation)


def _summary(history: list[tuple[str, str]], user: str) -> str:
    if not history:
        return user
    lines = ["Earlier turns:"] + [f"- Turn {i}: you answered {r.strip()!r}" for i, (_u, r) in enumerate(history, 1)]
    return "\n".join(lines) + "\n\n" + user


def extra_round(plan: Iterable[tuple[str, int, dict[str, Any]]], seed_train: int, step: int, round_: int, n: int
                ) -> tuple[list[tuple[str, int, dict[str, Any]]], list[int], int]:
    """Dynamic sampling's extra rollout round ``round_`` (1, 2, ...) of ``step``: the plan of ``n`` one-group
    entries cycling over the env plan's groups, their seeds, and the offset to add to their group ids, so that no
    other round or step shares a seed or a group id."""
    base = 10**7 + step * 10**4 + round_ * 10**3
    slots = [(name, opts) for name, groups, opts in plan for _ in range(groups)]
    return ([(slots[i % len(slots)][0], 1, slots[i % len(slots)][1]) for i in range(n)],
            [seed_train + base + i for i in range(n)], base)


def make_episodes(envs: Any, plan: Iterable[tuple[str, int, dict[str, Any]]], *, seeds: list[int], group_size: int,
                  config: Any, codec: ChatCodec, temperature: float | None = None, first_episode_id: int = 0
                  ) -> list[Episode]:
    """Episodes for an env plan: group ``i`` (over the plan's variants in order) resets with ``seeds[i]``; every
    member of a group shares the seed, so the initial state (GRPO-style groups)."""
    episodes: list[Episode] = []
    group = 0
    for name, n_groups, options in plan:
        for _ in range(n_groups):
            for _member in range(group_size):
                try:
                    env = envs.make(name, options)
                except Exception as exc:  # a broken env constructor costs its episodes, like a failing step
                    env = _BrokenEnv(exc)
                episodes.append(Episode(env, name=name, group_id=group, seed=seeds[group], config=config,
                                        codec=codec, episode_id=first_episode_id + len(episodes),
                                        temperature=temperature))
            group += 1
    return episodes


class _BrokenEnv:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def reset(self, **_: Any) -> Any:
        raise self.error


def run_lockstep(episodes: list[Episode], policy: Policy, *, env_workers: int = 1) -> RolloutBatch:
    """Run episodes together, batching all waiting generation requests into one ``policy.generate`` call."""
    gens = [ep.run() for ep in episodes]
    pending: dict[int, Any] = {i: next(g) for i, g in enumerate(gens)}
    done: dict[int, Trajectory] = {}
    pool = concurrent.futures.ThreadPoolExecutor(env_workers) if env_workers > 1 else None

    def send(i: int, value: Any) -> None:
        try:
            pending[i] = gens[i].send(value)
        except StopIteration as stop:
            done[i] = stop.value
            pending.pop(i)

    try:
        while pending:
            while calls := [i for i, r in pending.items() if isinstance(r, EnvCall)]:
                outcomes = (pool.map(lambda i: pending[i].run(), calls) if pool
                            else [pending[i].run() for i in calls])
                for i, outcome in zip(calls, list(outcomes)):
                    send(i, outcome)
            waiting = sorted(pending)
            if waiting:
                results = policy.generate([pending[i] for i in waiting])
                for i, res in zip(waiting, results):
                    send(i, res)
    finally:
        if pool:
            pool.shutdown()
    return RolloutBatch([done[i] for i in range(len(gens))])


async def run_async(episode: Episode, agenerate: Callable[[GenerationRequest], Any]) -> Trajectory:
    """Run one episode against an async generation function; env calls run in the default executor."""
    loop = asyncio.get_running_loop()
    gen = episode.run()
    request = next(gen)
    while True:
        if isinstance(request, EnvCall):
            value = await loop.run_in_executor(None, request.run)
        else:
            value = await agenerate(request)
        try:
            request = gen.send(value)
        except StopIteration as stop:
            return cast(Trajectory, stop.value)


class ScriptedPolicy:
    """A policy without a model: it answers ``<think>…</think><answer>ACTION</answer>`` (``ACTION</answer>`` with
    ``think=False``, whose prompt already ends with ``<answer>``) in characters of a
    :class:`~ragen_core.starpo.chat.TextTokenizer`, the action chosen by ``choose(episode_id)`` (e.g. the env's oracle
    or a random valid action). Log-probs are 0."""

    def __init__(self, choose: Callable[[int], str], think: bool = True) -> None:
        self.tokenizer = TextTokenizer()
        self.choose, self.think = choose, think

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        out = []
        for req in requests:
            action = self.choose(req.episode_id)
            text = f"I will act.</think><answer>{action}</answer>" if self.think else f" {action} </answer>"
            ids = tuple(self.tokenizer.encode(text))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids), mean_entropy=0.0))
        return out

    @classmethod
    def for_episodes(cls, episodes: list[Episode], kind: str, seed: int = 0) -> ScriptedPolicy:
        """``kind`` = ``oracle`` (the env's oracle, random when it has none) or ``random`` (a random valid action)."""
        rng = random.Random(seed)
        by_id = {ep.episode_id: ep for ep in episodes}

        def choose(episode_id: int) -> str:
            env = by_id[episode_id].env
            if kind == "oracle":
                action = getattr(env, "oracle_action", lambda: None)()
                if action is not None:
                    return str(action)
            names = getattr(env, "action_names", None)
            return rng.choice(list(names)) if names else rng.choice(["0", "1", "42"])

        return cls(choose, think=episodes[0].cfg.think if episodes else True)


def random_baseline(envs: Any, plan: list[Any], seeds: list[int], group_size: int, config: Any,
                    repeats: int = 4) -> float:
    """Success rate of a policy that answers one random valid action per turn in a perfect format, on the episodes
    ``plan``/``seeds``/``group_size`` define (a validation set), averaged over ``repeats`` plays: the level a
    trained policy must beat to have learned the task rather than the format."""
    total, count = 0.0, 0
    for rep in range(repeats):
        episodes = make_episodes(envs, plan, seeds=seeds, group_size=group_size, config=config,
                                 codec=ChatCodec(TextTokenizer(), think=config.think))
        batch = run_lockstep(episodes, ScriptedPolicy.for_episodes(episodes, "random", seed=rep))
        total += sum(t.success for t in batch.trajectories)
        count += len(batch.trajectories)
    return total / count if count else 0.0
