"""The ``collapse`` diagnostic: formulas against the reference, synthetic policies, sampling, EMA, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.checks import check_diagnostic
from ragen_core.config import RolloutConfig
from ragen_core.data import RolloutBatch
from ragen_core.protocols import DiagnosticContext
from ragen_core.starpo.chat import ChatCodec, TextTokenizer
from ragen_core.starpo.rollout import Episode, GenerationResult, run_lockstep
from ragen_plugins_diagnostics.collapse import (
    Collapse,
    CollapseConfig,
    _trajectory_sample,
    _turn_pairs,
    classify_regime,
    cross_metrics,
    reasoning_length,
)

from .helpers import TOK, CopyScorer, IgnoreScorer, copy_batch, random_context, trajectory
from .reference import reference_metrics


def ctx(batch, scorer, step=1):
    return DiagnosticContext(batch=batch, step=step, scorer=scorer)


def family(metrics, name):
    prefix = f"collapse/{name}/"
    return {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}


# ------------------------------------------------------------------------------------------- contract

def test_check_diagnostic_passes():
    check_diagnostic(Collapse(), make_context=random_context, n_contexts=12)


def test_check_diagnostic_passes_with_small_samples():
    check_diagnostic(Collapse(CollapseConfig(pairs=3, batch_size=2, seed=5)), make_context=random_context,
                     n_contexts=8)


def test_no_scorer_gives_no_metrics_and_a_scorer_needs_a_tokenizer():
    batch = copy_batch(2, 2)
    assert Collapse().compute(ctx(batch, None)) == {}

    class Bare:
        def score(self, prompts, continuations):
            return [[0.0] * len(c) for c in continuations]

    with pytest.raises(TypeError, match="tokenizer"):
        Collapse().compute(ctx(batch, Bare()))


# ------------------------------------------------------------------------------------------- formulas

@st.composite
def ell_matrices(draw):
    n_pairs = draw(st.integers(1, 9))
    n_cols = draw(st.integers(1, 10))
    ties = draw(st.booleans())
    value = st.sampled_from([-3.0, -1.5, -1.0, 0.0]) if ties else st.floats(-80, 0, allow_nan=False)
    ell = [[draw(value) for _ in range(n_cols)] for _ in range(n_pairs)]
    lengths = [draw(st.integers(1, 30)) for _ in range(n_pairs)]
    own = [draw(st.integers(0, n_cols - 1)) for _ in range(n_pairs)]
    return ell, lengths, own


@settings(max_examples=150, deadline=None)
@given(ell_matrices())
def test_cross_metrics_match_the_reference(case):
    ell, lengths, own = case
    got, stds = cross_metrics(np.array(ell), lengths, own)
    want = reference_metrics(ell, lengths, own)
    assert got.keys() == want.keys()
    for key in want:
        assert math.isclose(got[key], want[key], rel_tol=1e-9, abs_tol=1e-9), (key, got[key], want[key])
        assert math.isfinite(got[key])
    if len(ell[0]) >= 2:
        assert stds == pytest.approx((want["marginal_std"], want["marginal_std_seq"]))
        assert got["mi_estimate"] <= got["mi_upper_bound"] + 1e-9
        assert got["mi_seq_estimate"] <= got["mi_upper_bound"] + 1e-9
    else:
        assert stds is None


def test_hand_example():
    # two prompts; z0 belongs to column 0, z1 to column 1; |z| = 2 and 1
    ell = [[-2.0, -6.0], [-3.0, -1.0]]
    got, _ = cross_metrics(np.array(ell), [2, 1], [0, 1])
    m = [-1.0, -1.0]
    g = [math.log(math.exp(-1) + math.exp(-3)) - math.log(2), math.log(math.exp(-3) + math.exp(-1)) - math.log(2)]
    assert got["mi_estimate"] == pytest.approx(sum(m) / 2 - sum(g) / 2)
    assert got["conditional_entropy_est"] == pytest.approx(1.0)
    assert got["conditional_entropy_seq_est"] == pytest.approx(1.5)
    assert got["retrieval_accuracy"] == 1.0 and got["retrieval_accuracy_chance"] == 0.5
    assert got["mi_upper_bound"] == pytest.approx(math.log(2))


def test_regime_quadrants():
    log_n = math.log(8)
    assert classify_regime(1.0, 0.9 * log_n, log_n) == 0
    assert classify_regime(1.0, 0.1 * log_n, log_n) == 1
    assert classify_regime(0.1, 0.9 * log_n, log_n) == 2
    assert classify_regime(0.1, 0.1 * log_n, log_n) == 3
    assert classify_regime(1.0, 0.3 * log_n, log_n, mi_fraction_threshold=0.25) == 0
    assert classify_regime(1.0, 0.9 * log_n, log_n, entropy_threshold=2.0) == 2


# ------------------------------------------------------------------------------------------- synthetic policies

@pytest.mark.parametrize("name", ["first_turn", "trajectory"])
def test_a_policy_copying_its_input_has_maximal_mi(name):
    metrics = Collapse().compute(ctx(copy_batch(8, 4, n_turns=3), CopyScorer()))
    m = family(metrics, name)
    n = m["num_prompts"]
    assert n == 8 if name == "first_turn" else n > 8
    assert m["mi_upper_bound"] == pytest.approx(math.log(n))
    assert m["mi_estimate"] == pytest.approx(math.log(n) - math.log(1 + (n - 1) * math.exp(-10)), abs=1e-9)
    assert m["mi_seq_estimate"] == pytest.approx(math.log(n), abs=1e-9)
    assert m["retrieval_accuracy"] == 1.0
    assert m["retrieval_accuracy_chance"] == pytest.approx(1 / n)
    assert m["retrieval_accuracy@8_chance"] == pytest.approx(min(8, n) / n)
    assert m["conditional_entropy_est"] == 0.0
    assert m["regime"] == 2.0  # low entropy, high MI: compressed
    assert metrics["collapse/valid_thinking_rate"] == 1.0


@pytest.mark.parametrize("name", ["first_turn", "trajectory"])
def test_a_policy_ignoring_its_input_has_no_mi_and_chance_accuracy(name):
    m = family(Collapse().compute(ctx(copy_batch(8, 4, n_turns=3), IgnoreScorer())), name)
    n = m["num_prompts"]
    assert abs(m["mi_estimate"]) < 1e-12 and abs(m["mi_seq_estimate"]) < 1e-9
    for k in (1, 2, 4, 8):
        key = "retrieval_accuracy" if k == 1 else f"retrieval_accuracy@{k}"
        assert m[key] == pytest.approx(min(k, n) / n) == pytest.approx(m[f"{key}_chance"])
    assert abs(m["mi_zscore"]) < 1e-9 and abs(m["mi_zscore_ema"]) < 1e-9
    assert m["conditional_entropy_est"] == pytest.approx(m["reasoning_entropy_est"])
    assert m["regime"] == 1.0  # high entropy (> 0.5 nats/token), no MI: template collapse
    low = family(Collapse(CollapseConfig(entropy_threshold=5.0)).compute(
        ctx(copy_batch(8, 4, n_turns=3), IgnoreScorer())), name)
    assert low["regime"] == 3.0


def test_a_diverse_policy():
    class Diverse(CopyScorer):
        def score(self, prompts, continuations):
            return [[v - 1.0 for v in row] for row in super().score(prompts, continuations)]

    m = family(Collapse().compute(ctx(copy_batch(6, 3), Diverse())), "first_turn")
    assert m["conditional_entropy_est"] == pytest.approx(1.0)
    assert m["mi_fraction"] == pytest.approx(1.0, abs=1e-6)
    assert m["regime"] == 0.0


def test_zscore_is_mi_over_marginal_std():
    m = family(Collapse().compute(random_context(4)), "trajectory")
    assert m["mi_zscore"] == pytest.approx(m["mi_estimate"] / (m["marginal_std"] + 1e-3))
    assert m["mi_zscore_seq"] == pytest.approx(m["mi_seq_estimate"] / (m["marginal_std_seq"] + 1e-3))


def test_zscore_ema_advances_once_per_step():
    diag = Collapse(CollapseConfig(families=("trajectory",), ema_decay=0.9))
    contexts = [random_context(s) for s in (4, 9, 13)]
    stds, emas = [], []
    for step, c in enumerate(contexts, start=1):
        m = family(diag.compute(DiagnosticContext(c.batch, step, c.scorer)), "trajectory")
        stds.append(m["marginal_std"])
        emas.append(m["marginal_std_ema"])
        assert m["mi_zscore_ema"] == pytest.approx(m["mi_estimate"] / (m["marginal_std_ema"] + 1e-3))
    expected = stds[0]
    assert emas[0] == pytest.approx(expected)
    for s, e in zip(stds[1:], emas[1:]):
        expected = 0.9 * expected + 0.1 * s
        assert e == pytest.approx(expected)
    assert len(set(stds)) == 3  # the contexts differ, so the EMA really moved
    again = family(diag.compute(DiagnosticContext(contexts[2].batch, 3, contexts[2].scorer)), "trajectory")
    assert again["marginal_std_ema"] == pytest.approx(emas[2])  # recomputing step 3 does not advance the EMA
    nxt = family(diag.compute(DiagnosticContext(contexts[0].batch, 4, contexts[0].scorer)), "trajectory")
    assert nxt["marginal_std_ema"] == pytest.approx(0.9 * emas[2] + 0.1 * stds[0])


# ------------------------------------------------------------------------------------------- columns and errors

def test_differing_first_prompts_in_a_group_name_the_group():
    batch = copy_batch(3, 2)
    batch.trajectories += [trajectory(7, ["Z"], ["Z here"]), trajectory(7, ["Y"], ["Y here"])]
    with pytest.raises(ValueError, match=r"group 7 .*different first-turn prompts"):
        Collapse().compute(ctx(batch, CopyScorer()))
    # the trajectory family alone does not need identical first prompts
    Collapse(CollapseConfig(families=("trajectory",))).compute(ctx(batch, CopyScorer()))


def test_identical_prompts_across_groups_are_one_column():
    batch = copy_batch(5, 3, first_state=lambda g: "A" if g < 3 else chr(0x4E00 + g))
    m = family(Collapse().compute(ctx(batch, CopyScorer())), "first_turn")
    assert m["num_prompts"] == 3.0
    assert m["retrieval_accuracy_chance"] == pytest.approx(1 / 3)
    assert m["mi_upper_bound"] == pytest.approx(math.log(3))
    assert m["retrieval_accuracy"] == 1.0


def test_one_prompt_reports_only_what_is_defined():
    batch = copy_batch(1, 4)
    m = family(Collapse().compute(ctx(batch, CopyScorer())), "first_turn")
    assert set(m) == {"num_pairs", "num_prompts", "reasoning_tokens_mean", "matched_log_prob_mean",
                      "conditional_entropy_est", "conditional_entropy_seq_est"}
    assert m["num_prompts"] == 1.0 and m["num_pairs"] == 4.0


def test_no_reasoning_reports_zero_pairs_and_the_thinking_rate():
    batch = RolloutBatch([trajectory(g, ["A", "B"], [None, "   "]) for g in range(3)])
    metrics = Collapse().compute(ctx(batch, CopyScorer()))
    assert metrics == {"collapse/valid_thinking_rate": 0.0, "collapse/first_turn/num_pairs": 0.0,
                       "collapse/trajectory/num_pairs": 0.0}
    assert Collapse().compute(ctx(RolloutBatch([]), CopyScorer())) == {
        "collapse/first_turn/num_pairs": 0.0, "collapse/trajectory/num_pairs": 0.0}


def test_valid_thinking_rate_and_env_errors():
    batch = RolloutBatch([
        trajectory(0, ["A", "B", "C"], ["A x", None, "C y"]),
        trajectory(1, ["D"], ["  "]),
        trajectory(2, ["E", "F"], ["E", "F"], env_error="crash"),
    ])
    metrics = Collapse().compute(ctx(batch, CopyScorer()))
    assert metrics["collapse/valid_thinking_rate"] == pytest.approx(2 / 4)


def test_pairs_caps_the_sample_and_scoring_is_batched():
    scorer = CopyScorer()
    metrics = Collapse(CollapseConfig(pairs=5, batch_size=3)).compute(ctx(copy_batch(8, 4, 2), scorer))
    assert metrics["collapse/first_turn/num_pairs"] == 5.0
    assert metrics["collapse/trajectory/num_pairs"] == 5.0
    assert all(len(p) <= 3 for p, _c in scorer.calls)
    scored = sum(len(p) for p, _c in scorer.calls)
    expected = sum(metrics[f"collapse/{f}/num_pairs"] * metrics[f"collapse/{f}/num_prompts"]
                   for f in ("first_turn", "trajectory"))
    assert scored == expected


def test_batch_size_is_passed_to_scorers_that_take_it():
    seen = []

    class Sized(IgnoreScorer):
        def score(self, prompts, continuations, batch_size=16):
            seen.append(batch_size)
            return super().score(prompts, continuations)

    Collapse(CollapseConfig(batch_size=4)).compute(ctx(copy_batch(3, 2), Sized()))
    assert seen and set(seen) == {4}


def test_bad_scorer_output_raises():
    class Short(IgnoreScorer):
        def score(self, prompts, continuations, batch_size=16):
            return [row[:-1] for row in super().score(prompts, continuations)]

    class NaN(IgnoreScorer):
        def score(self, prompts, continuations, batch_size=16):
            return [[float("nan")] * len(c) for c in continuations]

    with pytest.raises(ValueError, match="log-probs for a continuation"):
        Collapse().compute(ctx(copy_batch(3, 2), Short()))
    with pytest.raises(ValueError, match="non-finite"):
        Collapse().compute(ctx(copy_batch(3, 2), NaN()))


def test_trajectory_sampling_weighs_trajectories_equally_without_repeats():
    trajs = _turn_pairs(copy_batch(4, 3, n_turns=4), TOK)
    rng = np.random.default_rng(0)
    first_round = _trajectory_sample(trajs, len(trajs), rng)
    owners = [next(i for i, (_t, turns) in enumerate(trajs) if any(p is t for t in turns)) for p in first_round]
    assert sorted(owners) == list(range(len(trajs)))
    everything = _trajectory_sample(trajs, 10_000, np.random.default_rng(1))
    assert len(everything) == 4 * 3 * 4 and len({id(p) for p in everything}) == len(everything)


# ------------------------------------------------------------------------------------------- X and Z

class PieceTokenizer:
    """A tokenizer whose tokens are multi-character pieces (like BPE)."""

    vocab = {1: "I", 2: " go", 3: " </", 4: "think", 5: ">", 6: "<answer>Up</answer>", 7: "go</", 8: "  ", 9: "</"}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.vocab[i] for i in ids)


@pytest.mark.parametrize(("ids", "want"), [
    ([1, 2, 3, 4, 5, 6], 2),  # " </" starts the tag: left out of Z
    ([1, 7, 4, 5, 6], 1),  # a token holding reasoning and the tag's start: only whole reasoning tokens
    ([9, 4, 5, 6], 0),  # empty reasoning
    ([8, 9, 4, 5, 6], 0),  # blank reasoning
    ([1, 2, 6], 0),  # no </think>
    ([], 0),
])
def test_reasoning_length(ids, want):
    assert reasoning_length(PieceTokenizer(), ids) == want


class Recorder:
    """A policy recording the exact prompt ids of every request, answering with prompt-dependent reasoning."""

    tokenizer = TextTokenizer()

    def __init__(self):
        self.seen = {}

    def generate(self, requests):
        out = []
        for req in requests:
            text = f"len {len(req.prompt_ids)} so Inc</think><answer>Inc</answer>"
            ids = tuple(self.tokenizer.encode(text))
            reasoning = ids[:-len("</think><answer>Inc</answer>")]
            self.seen.setdefault(req.episode_id, []).append((tuple(req.prompt_ids), reasoning))
            out.append(GenerationResult(token_ids=ids, logprobs=(0.0,) * len(ids), mean_entropy=0.0))
        return out


@pytest.mark.parametrize("mode", ["full", "limited_multi_turn", "single_turn"])
def test_pairs_are_exactly_what_the_model_saw_and_said(mode):
    from tests.core.toy import CounterConfig, CounterEnv

    codec = ChatCodec(TextTokenizer())
    config = RolloutConfig(max_turn=4, context_mode=mode)
    episodes = [Episode(CounterEnv(CounterConfig(target=4, random_start=True)), name="counter", group_id=i // 2,
                        seed=i // 2, episode_id=i, config=config, codec=codec) for i in range(4)]
    policy = Recorder()
    batch = run_lockstep(episodes, policy)
    pairs = _turn_pairs(batch, TOK)
    assert len(pairs) == 4
    for traj, turns in pairs:
        seen = policy.seen[traj.episode_id]
        assert [(t.context, t.z) for t in turns] == seen
        assert all(TOK.decode(list(t.context)).endswith("<think>") for t in turns)
    m = Collapse().compute(ctx(batch, CopyScorer()))
    assert m["collapse/valid_thinking_rate"] == 1.0
