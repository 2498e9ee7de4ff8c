"""Slow, obvious reference implementations of the estimators, written from their stated rules.

Plain Python lists and loops over rows and tokens, no NumPy, no sharing with the plugin's code. Each function
takes an :class:`~ragen_core.protocols.AdvantageInput` and returns ``(advantages, returns)`` as nested lists.
"""

from __future__ import annotations

import math
from typing import Any

from ragen_core.protocols import AdvantageInput

WHITEN_EPS = 1e-8


def _lists(inp: AdvantageInput) -> tuple[list[list[float]], list[list[bool]], list[Any]]:
    rewards = [[float(x) for x in row] for row in _tolist(inp.token_rewards)]
    mask = [[bool(m) for m in row] for row in _tolist(inp.response_mask)]
    groups = [_plain(g) for g in _tolist(inp.group_ids)]
    return rewards, mask, groups


def _tolist(x: Any) -> list:
    return x.tolist() if hasattr(x, "tolist") else list(x)


def _plain(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def _zeros(mask: list[list[bool]]) -> list[list[float]]:
    return [[0.0 for _ in row] for row in mask]


def generated(mask_row: list[bool]) -> list[int]:
    """Positions of the generated tokens of a row, in order."""
    return [j for j, m in enumerate(mask_row) if m]


def whiten(x: list[list[float]], mask: list[list[bool]]) -> list[list[float]]:
    """(x - mean) / sqrt(unbiased var + 1e-8) over all masked entries; one entry -> 0; masked-out -> 0."""
    vals = [x[i][j] for i in range(len(x)) for j in range(len(x[i])) if mask[i][j]]
    n = len(vals)
    out = _zeros(mask)
    if n == 0:
        return out
    mean = sum(vals) / n
    var = sum((v - mean) ** 2 for v in vals) / (n - 1) if n > 1 else 0.0
    for i in range(len(x)):
        for j in range(len(x[i])):
            if mask[i][j]:
                out[i][j] = (x[i][j] - mean) / math.sqrt(var + WHITEN_EPS)
    return out


def row_score(rewards_row: list[float], mask_row: list[bool]) -> float:
    total = 0.0
    for r, m in zip(rewards_row, mask_row):
        if m:
            total += r
    return total


def episodes_of(inp: AdvantageInput) -> list[Any]:
    """Episode key of each row (the row itself when episode_ids is None)."""
    n = len(_tolist(inp.response_mask))
    if inp.episode_ids is None:
        return [("row", i) for i in range(n)]
    return [("episode", _plain(e)) for e in _tolist(inp.episode_ids)]


def episode_table(inp: AdvantageInput) -> tuple[dict[Any, float], dict[Any, Any]]:
    """Episode -> score (sum over all its rows), episode -> group."""
    rewards, mask, groups = _lists(inp)
    eps = episodes_of(inp)
    score: dict[Any, float] = {}
    group: dict[Any, Any] = {}
    for i, e in enumerate(eps):
        score[e] = score.get(e, 0.0) + row_score(rewards[i], mask[i])
        group[e] = groups[i]
    return score, group


def _members(group: dict[Any, Any]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for e, g in group.items():
        out.setdefault(g, []).append(e)
    return out


def _mean_std(xs: list[float]) -> tuple[float, float]:
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    return mean, std


def grpo_episode_adv(inp: AdvantageInput, eps: float, norm_by_std: bool) -> dict[Any, float]:
    score, group = episode_table(inp)
    adv: dict[Any, float] = {}
    for _g, members in _members(group).items():
        xs = [score[e] for e in members]
        if len(xs) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = _mean_std(xs)
        for e in members:
            adv[e] = (score[e] - mean) / (std + eps) if norm_by_std else score[e] - mean
    return adv


def _broadcast(inp: AdvantageInput, adv: dict[Any, float]) -> list[list[float]]:
    _r, mask, _g = _lists(inp)
    eps = episodes_of(inp)
    return [[adv[eps[i]] if mask[i][j] else 0.0 for j in range(len(mask[i]))] for i in range(len(mask))]


def grpo(inp: AdvantageInput, eps: float = 1e-6, norm_by_std: bool = True):
    a = _broadcast(inp, grpo_episode_adv(inp, eps, norm_by_std))
    return a, a


def drgrpo(inp: AdvantageInput):
    a = _broadcast(inp, grpo_episode_adv(inp, 1.0, False))
    return a, a


def rloo(inp: AdvantageInput):
    score, group = episode_table(inp)
    adv: dict[Any, float] = {}
    for _g, members in _members(group).items():
        for e in members:
            others = [score[o] for o in members if o != e]
            adv[e] = score[e] - sum(others) / len(others) if others else score[e]
    a = _broadcast(inp, adv)
    return a, a


def reinforce_pp(inp: AdvantageInput, gamma: float = 1.0, reset_at_masked: bool = False):
    rewards, mask, _g = _lists(inp)
    returns = _zeros(mask)
    for i in range(len(mask)):
        if reset_at_masked:
            running = 0.0
            for j in reversed(range(len(mask[i]))):
                if mask[i][j]:
                    running = rewards[i][j] + gamma * running
                    returns[i][j] = running
                else:
                    running = 0.0
        else:
            pos = generated(mask[i])
            running = 0.0
            for j in reversed(pos):
                running = rewards[i][j] + gamma * running
                returns[i][j] = running
    return whiten(returns, mask), returns


def reinforce_pp_baseline(inp: AdvantageInput):
    a = whiten(_broadcast(inp, grpo_episode_adv(inp, 1.0, False)), _lists(inp)[1])
    return a, a


def _values(inp: AdvantageInput) -> list[list[float]]:
    return [[float(v) for v in row] for row in _tolist(inp.values)]


def gae(inp: AdvantageInput, gamma: float = 1.0, lam: float = 1.0, whiten_adv: bool = True):
    rewards, mask, _g = _lists(inp)
    values = _values(inp)
    adv = _zeros(mask)
    returns = _zeros(mask)
    for i in range(len(mask)):
        pos = generated(mask[i])
        for k in reversed(range(len(pos))):
            t = pos[k]
            v_next = values[i][pos[k + 1]] if k + 1 < len(pos) else 0.0
            a_next = adv[i][pos[k + 1]] if k + 1 < len(pos) else 0.0
            delta = rewards[i][t] + gamma * v_next - values[i][t]
            adv[i][t] = delta + gamma * lam * a_next
        for t in pos:
            returns[i][t] = adv[i][t] + values[i][t]
    return (whiten(adv, mask) if whiten_adv else adv), returns


def turns_of_row(inp: AdvantageInput, i: int) -> list[tuple[int, list[int]]]:
    """(turn id, positions) of row i: generated tokens grouped by equal consecutive turn ids."""
    mask = _lists(inp)[1]
    tids = [int(x) for x in _tolist(inp.turn_ids)[i]]
    out: list[tuple[int, list[int]]] = []
    for j in generated(mask[i]):
        if out and out[-1][0] == tids[j]:
            out[-1][1].append(j)
        else:
            out.append((tids[j], [j]))
    return out


def turn_level_gae(rewards_k: list[float], values_k: list[float], gamma: float, lam: float) -> list[float]:
    """Plain GAE over a sequence of turns (V and A after the last turn are 0)."""
    n = len(rewards_k)
    adv = [0.0] * n
    for k in reversed(range(n)):
        v_next = values_k[k + 1] if k + 1 < n else 0.0
        a_next = adv[k + 1] if k + 1 < n else 0.0
        adv[k] = rewards_k[k] + gamma * v_next - values_k[k] + gamma * lam * a_next
    return adv


def bilevel_gae(inp: AdvantageInput, turn_gamma: float = 0.95, turn_lam: float = 1.0, token_gamma: float = 1.0,
                token_lam: float = 1.0, turn_value: str = "last", whiten_adv: bool = True):
    rewards, mask, _g = _lists(inp)
    values = _values(inp)
    adv = _zeros(mask)
    returns = _zeros(mask)
    for i in range(len(mask)):
        turns = turns_of_row(inp, i)
        r_k = [sum(rewards[i][t] for t in pos) for _tid, pos in turns]
        v_k = [values[i][pos[-1] if turn_value == "last" else pos[0]] for _tid, pos in turns]
        a_k = turn_level_gae(r_k, v_k, turn_gamma, turn_lam)
        for k, (_tid, pos) in enumerate(turns):
            if k + 1 < len(turns):
                boot = v_k[k + 1] + turn_lam * a_k[k + 1]
            else:
                boot = 0.0
            last = pos[-1]
            adv[i][last] = rewards[i][last] + turn_gamma * boot - values[i][last]
            for j in reversed(range(len(pos) - 1)):
                t, nxt = pos[j], pos[j + 1]
                adv[i][t] = rewards[i][t] + token_gamma * values[i][nxt] - values[i][t] \
                    + token_gamma * token_lam * adv[i][nxt]
        for t in generated(mask[i]):
            returns[i][t] = adv[i][t] + values[i][t]
    return (whiten(adv, mask) if whiten_adv else adv), returns


def gigpo(inp: AdvantageInput, gamma: float = 0.95, step_weight: float = 1.0, eps: float = 1e-6,
          norm_by_std: bool = True):
    rewards, mask, groups = _lists(inp)
    ep_adv = grpo_episode_adv(inp, eps, norm_by_std)
    eps_of_row = episodes_of(inp)
    # turns of each episode, in row order then turn order: (row, turn id, positions, reward)
    ep_turns: dict[Any, list[tuple[int, int, list[int], float]]] = {}
    for i in range(len(mask)):
        for tid, pos in turns_of_row(inp, i):
            ep_turns.setdefault(eps_of_row[i], []).append((i, tid, pos, sum(rewards[i][t] for t in pos)))
    step_return: dict[tuple[int, int], float] = {}
    for turns in ep_turns.values():
        for k in range(len(turns)):
            total = 0.0
            for j in range(k, len(turns)):
                total += gamma ** (j - k) * turns[j][3]
            step_return[(turns[k][0], turns[k][1])] = total
    clusters: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    for turns in ep_turns.values():
        for (i, tid, _pos, _r) in turns:
            key = inp.state_keys[i][tid]
            clusters.setdefault((groups[i], key), []).append((i, tid))
    step_adv: dict[tuple[int, int], float] = {}
    for members in clusters.values():
        xs = [step_return[m] for m in members]
        for m in members:
            if len(xs) == 1:
                step_adv[m] = 0.0
            else:
                mean, std = _mean_std(xs)
                step_adv[m] = (step_return[m] - mean) / (std + eps) if norm_by_std else step_return[m] - mean
    adv = _zeros(mask)
    for turns in ep_turns.values():
        for (i, tid, pos, _r) in turns:
            for t in pos:
                adv[i][t] = ep_adv[eps_of_row[i]] + step_weight * step_adv[(i, tid)]
    return adv, adv
