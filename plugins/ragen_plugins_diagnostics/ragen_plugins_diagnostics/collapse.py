"""RAGEN-2's reasoning-collapse diagnostics: how much the reasoning Z tells about the input X.

**Pairs.** X is everything the model saw before its reasoning: the turn's context, which ends with the literal
``<think>`` (in ``full`` mode the segment's earlier ``prompt_ids + response_ids`` and the turn's own
``prompt_ids``; see :class:`ragen_core.data.Turn`). Z is the leading part of the turn's ``response_ids`` before
``</think>``: the response is decoded with ``scorer.tokenizer``, and Z is the longest prefix of tokens whose text
ends at or before the ``</think>`` tag. A turn without ``</think>``, or whose reasoning text is blank, has no pair.
``collapse/valid_thinking_rate`` = turns with non-empty reasoning / turns. Trajectories whose env raised
(``env_error``) are left out.

**Families** (``families``; each seeded by ``seed`` and the step, so a context always gives the same sample):

- ``first_turn``: one pair per trajectory, its first turn. The trajectories of a group started from the same state,
  so their first prompts must be token-identical; a group where they differ raises :class:`ValueError` naming it.
  Up to ``pairs`` trajectories with valid reasoning are drawn without replacement.
- ``trajectory``: pick a trajectory, then one of its turns with valid reasoning (trajectories are visited in
  shuffled rounds, each round takes one not yet drawn turn of every trajectory that has one left, so every
  trajectory weighs the same and no (trajectory, turn) is drawn twice), up to ``pairs`` pairs.

Columns are the distinct prompts of the drawn pairs: prompts with identical tokens are one column (two groups of the
same seed, or the same turn reached twice), so N counts distinct inputs and chance is exactly 1/N.

**Cross-scoring.** Every z_i is teacher-forced after every column x_j → ℓ[i, j] = Σ log p(z_i | x_j) over Z's
tokens, and the per-token ℓ̄[i, j] = ℓ[i, j] / |z_i|. A scorer with ``score_matrix(prompts, continuations)``
(returning the ``[prompts, continuations]`` matrix of summed log-probs) is asked for the whole matrix in one call —
the torch policy's encodes each prompt once and shares it across all continuations, see
:meth:`ragen_plugins_torch.policy.HFPolicy.score_matrix`; any other scorer is called pair by pair through
``score(prompts, continuations)`` (per-token log-probs; batches of ``batch_size`` sequences, longest first). Both
give the same ℓ up to the floating-point noise of the model's forward passes. With c(i) the column of z_i's own
prompt and N columns:

- matched_i = ℓ̄[i, c(i)]; marginal_i = logsumexp_j ℓ̄[i, j] − log N (the uniform mixture of the batch's prompts);
  the ``_seq`` quantities use ℓ instead of ℓ̄;
- ``mi_estimate`` = mean(matched) − mean(marginal); ``mi_seq_estimate`` = mean(matched_seq − marginal_seq);
  ``mi_upper_bound`` = log N (neither estimate can exceed it);
- ``conditional_entropy_est`` H(Z|X) = −mean(matched); ``reasoning_entropy_est`` H(Z) = −mean(marginal); and their
  ``_seq_est`` versions; ``matched_log_prob_mean`` = mean(matched); ``marginal_log_prob_mean`` = mean(marginal);
- ``retrieval_accuracy@k`` (k = 1, 2, 4, 8; ``retrieval_accuracy`` is k = 1): z_i's own prompt is among the k
  columns with the highest ℓ̄[i, ·]. Ties are broken uniformly at random *in expectation*: with g columns strictly
  above the own one and e columns equal to it (itself included), the credit is clip((k − g) / e, 0, 1), so a
  policy that ignores X scores exactly chance. ``retrieval_accuracy@k_chance`` = min(k, N) / N;
  ``retrieval_above_chance`` = accuracy − 1/N;
- ``marginal_std`` = population std of marginal over the pairs; ``mi_zscore`` = mean((matched − marginal) /
  (marginal_std + 1e-3)) = mi_estimate / (marginal_std + 1e-3); ``marginal_std_seq`` and ``mi_zscore_seq`` likewise
  on the sequence level;
- ``mi_zscore_ema`` (and ``_seq``): the same with an exponential moving average of ``marginal_std`` instead
  (``ema ← std`` on the first computation, then ``ema ← ema_decay·ema + (1 − ema_decay)·std``), reported as
  ``marginal_std_ema``. **State:** the EMA lives on the diagnostic object, one per family, and advances once per
  training step: computing the same step again replaces that step's contribution rather than adding another, so a
  repeated context gives the same numbers (and the checks' determinism holds). It is not checkpointed: a resumed
  run starts it again from its first computation;
- ``num_pairs``, ``num_prompts`` (N), ``reasoning_tokens_mean`` (mean |z|).

**Regime** (``regime``: 0 diverse, 1 template collapse, 2 compressed, 3 low-entropy collapse) from the per-token
H(Z|X) (``conditional_entropy_est``) and ``mi_fraction`` = MI / log N, where MI is the sequence-level estimate by
default (``regime_mi: seq``; ``token`` uses ``mi_estimate``):

- 0 diverse: H(Z|X) ≥ ``entropy_threshold`` and MI ≥ ``mi_fraction_threshold`` · log N;
- 1 template collapse: H(Z|X) ≥ ``entropy_threshold`` and MI < ``mi_fraction_threshold`` · log N;
- 2 compressed: H(Z|X) < ``entropy_threshold`` and MI ≥ ``mi_fraction_threshold`` · log N;
- 3 low-entropy collapse: H(Z|X) < ``entropy_threshold`` and MI < ``mi_fraction_threshold`` · log N.

Defaults and why: ``entropy_threshold = 0.5`` nats per token — the geometric-mean probability of a sampled
token is then e^−0.5 ≈ 0.61 under the policy, i.e. near-greedy decoding; temperature-1 sampling of an instruct
model that still explores sits well above it, a collapsed one well below. ``mi_fraction_threshold = 0.5`` — the
reasoning carries at least half of the log N nats needed to single out its own prompt among the N in the batch
(≈ 1 when every z names its state, ≈ 0 for one template). The sequence-level MI is used because the per-token
estimate divides the evidence by |z|: a 100-token reasoning that identifies its prompt through a few tokens has a
per-token MI far below log N.

**Degenerate cases.** No pair: only ``num_pairs`` = 0. One column (N = 1): the matched quantities
(``conditional_entropy_est`` and its ``_seq``, ``matched_log_prob_mean``, counts); nothing that needs a mixture over
prompts. No scorer in the context: no metrics. Nothing is ever NaN: a scorer returning a non-finite log-prob, a
row of the wrong length or a ``score_matrix`` of the wrong shape raises :class:`ValueError`.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Sequence
from typing import Any, Literal

import attrs
import numpy as np

from ragen_core.validators import integer, number

__all__ = [
    "FAMILIES",
    "REGIMES",
    "Collapse",
    "CollapseConfig",
    "classify_regime",
    "cross_metrics",
    "reasoning_length",
]

Family = Literal["first_turn", "trajectory"]
#: the pair-sampling families, in the order their metrics are computed
FAMILIES: tuple[str, ...] = typing.get_args(Family)
#: regime names by code (``collapse/<family>/regime``)
REGIMES: tuple[str, ...] = ("diverse", "template collapse", "compressed", "low-entropy collapse")
#: the tag that closes the reasoning
THINK_CLOSE = "</think>"
#: added to the marginal std in the z-scores (RAGEN-2's value)
STD_EPS = 1e-3
#: the k of ``retrieval_accuracy@k`` besides 1
TOP_K: tuple[int, ...] = (2, 4, 8)


def _families(_inst: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    """At least one family, none repeated."""
    if not value:
        raise ValueError(f"'{attribute.name}' must name at least one of {', '.join(map(repr, FAMILIES))}")
    for v in value:
        if v not in FAMILIES:
            raise ValueError(f"'{attribute.name}' must hold only {', '.join(map(repr, FAMILIES))}: {v!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"'{attribute.name}' must not repeat a family: {list(value)}")


@attrs.frozen(kw_only=True)
class CollapseConfig:
    """Options of the ``collapse`` diagnostic (``diagnostics: [{name: collapse, pairs: 64}]``).

    :ivar pairs: most (x, z) pairs drawn per family (default 64, RAGEN-2's); the scoring cost is pairs × prompts.
    :ivar families: which samples to compute, of ``first_turn`` and ``trajectory`` (default both).
    :ivar seed: seeds the pair sampling, together with the step.
    :ivar ema_decay: decay of the marginal-std EMA behind ``mi_zscore_ema`` (default 0.9), in [0, 1).
    :ivar batch_size: sequences per ``scorer.score`` call (default 16); a scorer with ``score_matrix`` batches on
        its own terms (the torch policy: ``HFPolicy.score_tokens``).
    :ivar entropy_threshold: per-token H(Z|X), in nats, splitting high from low entropy (default 0.5).
    :ivar mi_fraction_threshold: MI / log N splitting high from low MI (default 0.5), in (0, 1].
    :ivar regime_mi: which MI estimate the regime uses: ``seq`` (default) or ``token``.
    """

    pairs: int = attrs.field(default=64, validator=integer(1))
    families: tuple[Family, ...] = attrs.field(default=FAMILIES, converter=tuple, validator=_families)
    seed: int = attrs.field(default=0, validator=integer(0))
    ema_decay: float = attrs.field(default=0.9, validator=number(0, 1, high_open=True))
    batch_size: int = attrs.field(default=16, validator=integer(1))
    entropy_threshold: float = attrs.field(default=0.5, validator=number(0))
    mi_fraction_threshold: float = attrs.field(default=0.5, validator=number(0, 1, low_open=True))
    regime_mi: Literal["seq", "token"] = attrs.field(default="seq", validator=attrs.validators.in_(("seq", "token")))


# --------------------------------------------------------------------------------------------- the formulas

def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    top = a.max(axis=1)
    return top + np.log(np.exp(a - top[:, None]).sum(axis=1))


def cross_metrics(ell: Any, lengths: Sequence[int], own: Sequence[int]
                  ) -> tuple[dict[str, float], tuple[float, float] | None]:
    """The metrics of one cross-scored sample (formulas in the module docstring), without the EMA and the regime.

    :param ell: ``[pairs, prompts]`` summed log-probs ℓ[i, j] of z_i after prompt j.
    :param lengths: |z_i| (tokens, > 0).
    :param own: the column of each z's own prompt.
    :returns: the metrics (unprefixed names) and the marginal stds ``(per token, sequence)``, None when N < 2.
    """
    seq = np.asarray(ell, dtype=np.float64)
    n_pairs, n_cols = seq.shape
    n = np.asarray(lengths, dtype=np.float64)
    tok = seq / n[:, None]
    rows = np.arange(n_pairs)
    own_arr = np.asarray(own, dtype=np.int64)
    m_tok, m_seq = tok[rows, own_arr], seq[rows, own_arr]
    out = {
        "num_pairs": float(n_pairs),
        "num_prompts": float(n_cols),
        "reasoning_tokens_mean": float(n.mean()),
        "matched_log_prob_mean": float(m_tok.mean()),
        "conditional_entropy_est": float(-m_tok.mean()) + 0.0,
        "conditional_entropy_seq_est": float(-m_seq.mean()) + 0.0,
    }
    if n_cols < 2:
        return out, None
    log_n = math.log(n_cols)
    g_tok = _logsumexp_rows(tok) - log_n
    g_seq = _logsumexp_rows(seq) - log_n
    std_tok, std_seq = float(g_tok.std()), float(g_seq.std())
    above = (seq > seq[rows, own_arr][:, None]).sum(axis=1)
    equal = (seq == seq[rows, own_arr][:, None]).sum(axis=1)
    out.update({
        "mi_estimate": float(m_tok.mean() - g_tok.mean()),
        "mi_seq_estimate": float((m_seq - g_seq).mean()),
        "mi_upper_bound": log_n,
        "marginal_log_prob_mean": float(g_tok.mean()),
        "reasoning_entropy_est": float(-g_tok.mean()),
        "reasoning_entropy_seq_est": float(-g_seq.mean()),
        "marginal_std": std_tok,
        "marginal_std_seq": std_seq,
        "mi_zscore": float(((m_tok - g_tok) / (std_tok + STD_EPS)).mean()),
        "mi_zscore_seq": float(((m_seq - g_seq) / (std_seq + STD_EPS)).mean()),
    })
    for k in (1, *TOP_K):
        name = "retrieval_accuracy" if k == 1 else f"retrieval_accuracy@{k}"
        out[name] = float(np.clip((k - above) / equal, 0.0, 1.0).mean())
        out[f"{name}_chance"] = min(k, n_cols) / n_cols
    out["retrieval_above_chance"] = out["retrieval_accuracy"] - 1.0 / n_cols
    return out, (std_tok, std_seq)


def classify_regime(conditional_entropy: float, mi: float, log_n: float, *, entropy_threshold: float = 0.5,
                    mi_fraction_threshold: float = 0.5) -> int:
    """0 diverse (high H, high MI), 1 template collapse (high H, low MI), 2 compressed (low H, high MI),
    3 low-entropy collapse (low H, low MI); see the module docstring for the thresholds."""
    high_h = conditional_entropy >= entropy_threshold
    high_mi = mi >= mi_fraction_threshold * log_n
    return (0 if high_mi else 1) if high_h else (2 if high_mi else 3)


# --------------------------------------------------------------------------------------------- pairs

def reasoning_length(tokenizer: Any, response_ids: Sequence[int]) -> int:
    """How many leading tokens of ``response_ids`` form the reasoning Z (0: no ``</think>`` or blank reasoning).

    The longest prefix whose decoded text ends at or before the ``</think>`` tag (found by bisection on the decoded
    length, so a token that starts the tag, e.g. ``" </"``, is left out of Z)."""
    ids = list(response_ids)

    def text(k: int) -> str:
        return tokenizer.decode(ids[:k], skip_special_tokens=False)

    full = text(len(ids))
    pos = full.find(THINK_CLOSE)
    if pos <= 0 or not full[:pos].strip():
        return 0
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(text(mid)) <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo if lo and text(lo).strip() else 0


@attrs.frozen
class _TurnPair:
    """One turn's candidate pair: its context X and its reasoning Z (empty: no valid reasoning)."""

    context: tuple[int, ...]
    z: tuple[int, ...]


def _turn_pairs(batch: Any, tokenizer: Any) -> list[tuple[Any, list[_TurnPair]]]:
    """Per usable trajectory (no env error, at least one turn): its turns' (X, Z)."""
    out = []
    for traj in batch:
        if traj.env_error is not None or not traj.turns:
            continue
        turns: list[_TurnPair] = []
        seq: list[int] = []
        for k, turn in enumerate(traj.turns):
            seq = list(turn.prompt_ids) if (turn.new_segment or k == 0) else [*seq, *turn.prompt_ids]
            z_len = reasoning_length(tokenizer, turn.response_ids)
            turns.append(_TurnPair(tuple(seq), tuple(turn.response_ids[:z_len])))
            seq += list(turn.response_ids)
        out.append((traj, turns))
    return out


def _first_turn_sample(trajs: list[tuple[Any, list[_TurnPair]]], pairs: int,
                       rng: np.random.Generator) -> list[_TurnPair]:
    first: dict[int, tuple[Any, tuple[int, ...]]] = {}
    for traj, turns in trajs:
        seen = first.setdefault(traj.group_id, (traj, turns[0].context))
        if seen[1] != turns[0].context:
            raise ValueError(
                f"collapse: group {traj.group_id} has trajectories with different first-turn prompts (episodes "
                f"{seen[0].episode_id} and {traj.episode_id}, seeds {seen[0].seed} and {traj.seed}); the first-turn "
                f"MI needs every trajectory of a group to start from the same prompt (same seed, same initial state)")
    valid = [turns[0] for _traj, turns in trajs if turns[0].z]
    if len(valid) > pairs:
        chosen = sorted(rng.choice(len(valid), size=pairs, replace=False).tolist())
        valid = [valid[i] for i in chosen]
    return valid


def _trajectory_sample(trajs: list[tuple[Any, list[_TurnPair]]], pairs: int,
                       rng: np.random.Generator) -> list[_TurnPair]:
    left = [[t for t in turns if t.z] for _traj, turns in trajs]
    left = [ts for ts in left if ts]
    out: list[_TurnPair] = []
    while left and len(out) < pairs:
        for i in rng.permutation(len(left)).tolist():
            if len(out) == pairs:
                break
            out.append(left[i].pop(int(rng.integers(len(left[i])))))
        left = [ts for ts in left if ts]
    return out


# --------------------------------------------------------------------------------------------- the diagnostic

@attrs.define
class _Ema:
    """An EMA over training steps that a repeated step recomputes instead of advancing."""

    step: int | None = None
    before: tuple[float, ...] | None = None
    value: tuple[float, ...] | None = None

    def advance(self, step: int, current: tuple[float, ...], decay: float) -> tuple[float, ...]:
        base = self.before if step == self.step else self.value
        new = current if base is None else tuple(decay * b + (1.0 - decay) * c for b, c in zip(base, current))
        self.step, self.before, self.value = step, base, new
        return new


class Collapse:
    """The ``collapse`` diagnostic (see the module docstring). Needs a scorer with ``score(prompts, continuations)``
    or ``score_matrix(prompts, continuations)`` and a ``tokenizer``; keeps the ``mi_zscore_ema`` state between
    calls."""

    config_cls = CollapseConfig

    def __init__(self, config: CollapseConfig | None = None) -> None:
        self.config = config if config is not None else CollapseConfig()
        self._ema: dict[str, _Ema] = {}

    def compute(self, ctx: Any) -> dict[str, float]:
        """Metrics ``collapse/valid_thinking_rate`` and ``collapse/<family>/<name>`` for the context's batch."""
        scorer = ctx.scorer
        if scorer is None:
            return {}
        tokenizer = getattr(scorer, "tokenizer", None)
        if tokenizer is None:
            raise TypeError("collapse: the scorer has no 'tokenizer' attribute (needed to find </think>)")
        trajs = _turn_pairs(ctx.batch, tokenizer)
        metrics: dict[str, float] = {}
        turns = [t for _traj, ts in trajs for t in ts]
        if turns:
            metrics["collapse/valid_thinking_rate"] = sum(bool(t.z) for t in turns) / len(turns)
        step = int(ctx.step)
        for family in self.config.families:
            rng = np.random.default_rng([self.config.seed, step % 2**32, FAMILIES.index(family)])
            sampler = _first_turn_sample if family == "first_turn" else _trajectory_sample
            sample = sampler(trajs, self.config.pairs, rng) if trajs else []
            values = self._family(family, sample, scorer, step)
            metrics.update({f"collapse/{family}/{k}": v for k, v in values.items()})
        return metrics

    def _family(self, family: str, sample: list[_TurnPair], scorer: Any, step: int) -> dict[str, float]:
        if not sample:
            return {"num_pairs": 0.0}
        columns: dict[tuple[int, ...], int] = {}
        own = [columns.setdefault(p.context, len(columns)) for p in sample]
        ell = self._cross_score(scorer, [p.z for p in sample], list(columns))
        out, stds = cross_metrics(ell, [len(p.z) for p in sample], own)
        if stds is None:
            return out
        std_tok, std_seq = self._ema.setdefault(family, _Ema()).advance(step, stds, self.config.ema_decay)
        out["marginal_std_ema"] = std_tok
        out["marginal_std_ema_seq"] = std_seq
        out["mi_zscore_ema"] = out["mi_estimate"] / (std_tok + STD_EPS)
        out["mi_zscore_ema_seq"] = out["mi_seq_estimate"] / (std_seq + STD_EPS)
        mi = out["mi_seq_estimate"] if self.config.regime_mi == "seq" else out["mi_estimate"]
        out["mi_fraction"] = mi / out["mi_upper_bound"]
        out["regime"] = float(classify_regime(
            out["conditional_entropy_est"], mi, out["mi_upper_bound"], entropy_threshold=self.config.entropy_threshold,
            mi_fraction_threshold=self.config.mi_fraction_threshold))
        return out

    def _cross_score(self, scorer: Any, zs: list[tuple[int, ...]], prompts: list[tuple[int, ...]]) -> np.ndarray:
        """ℓ[i, j] = Σ log p(z_i | prompt_j): through ``scorer.score_matrix`` when the scorer has one, else pair by
        pair through ``scorer.score`` in batches of ``batch_size``, longest sequences first."""
        if callable(getattr(scorer, "score_matrix", None)):
            return self._cross_score_matrix(scorer, zs, prompts)
        jobs = sorted(((i, j) for i in range(len(zs)) for j in range(len(prompts))),
                      key=lambda ij: -(len(zs[ij[0]]) + len(prompts[ij[1]])))
        kwargs = {"batch_size": self.config.batch_size} if _accepts_batch_size(scorer.score) else {}
        ell = np.zeros((len(zs), len(prompts)))
        size = self.config.batch_size
        for start in range(0, len(jobs), size):
            chunk = jobs[start:start + size]
            rows = scorer.score([list(prompts[j]) for _i, j in chunk], [list(zs[i]) for i, _j in chunk], **kwargs)
            if len(rows) != len(chunk):
                raise ValueError(f"collapse: scorer.score returned {len(rows)} rows for {len(chunk)} sequences")
            for (i, j), row in zip(chunk, rows):
                values = [float(v) for v in row]
                if len(values) != len(zs[i]):
                    raise ValueError(f"collapse: scorer.score returned {len(values)} log-probs for a continuation "
                                     f"of {len(zs[i])} tokens")
                total = math.fsum(values)
                if not all(math.isfinite(v) for v in values) or not math.isfinite(total):
                    raise ValueError("collapse: scorer.score returned a non-finite log-prob; the MI metrics would "
                                     "be NaN")
                ell[i, j] = total
        return ell

    @staticmethod
    def _cross_score_matrix(scorer: Any, zs: list[tuple[int, ...]], prompts: list[tuple[int, ...]]) -> np.ndarray:
        got = scorer.score_matrix([list(p) for p in prompts], [list(z) for z in zs])
        try:
            matrix = np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"collapse: scorer.score_matrix returned something that is not a matrix of numbers "
                             f"({type(got).__name__}): {exc}") from exc
        if matrix.shape != (len(prompts), len(zs)):
            raise ValueError(f"collapse: scorer.score_matrix returned shape {matrix.shape} for {len(prompts)} prompts "
                             f"and {len(zs)} continuations (want [prompts, continuations])")
        if not np.isfinite(matrix).all():
            raise ValueError("collapse: scorer.score_matrix returned a non-finite log-prob; the MI metrics would "
                             "be NaN")
        return np.ascontiguousarray(matrix.T)


def _accepts_batch_size(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "batch_size" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
