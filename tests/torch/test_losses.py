"""PPO loss pieces against hand-computed values; observation tokens get no gradient."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from ragen_plugins_torch.losses import aggregate, kl_penalty, policy_loss, token_logprobs_entropy, value_loss  # noqa: E402


def t(x: list) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


def test_clipped_surrogate_hand_computed() -> None:
    # ratios e^0.5=1.6487 (A>0 -> clipped at 1.28), e^-0.5=0.6065 (A<0 -> clipped at 0.8), e^0.1 (A>0, unclipped)
    logp, old = t([[0.5, -0.5, 0.1]]), t([[0.0, 0.0, 0.0]])
    adv, mask = t([[1.0, -2.0, 0.5]]), t([[1, 1, 1]])
    loss, info = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, dual_clip=None)
    expected = (-1.0 * 1.28 + max(2.0 * math.exp(-0.5), 2.0 * 0.8) - 0.5 * math.exp(0.1)) / 3
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert info["actor/pg_clipfrac"] == pytest.approx(2 / 3)  # tokens 1 and 2 take the clipped branch
    assert info["actor/ppo_kl"] == pytest.approx(-(0.5 - 0.5 + 0.1) / 3, abs=1e-6)


def test_dual_clip_caps_negative_advantages() -> None:
    logp, old, adv, mask = t([[3.0]]), t([[0.0]]), t([[-1.0]]), t([[1]])
    loss, _ = policy_loss(logp, old, adv, mask, dual_clip=3.0)
    assert float(loss) == pytest.approx(3.0)  # min(max(e^3, 1.28), 3) * 1
    loss, _ = policy_loss(logp, old, adv, mask, dual_clip=None)
    assert float(loss) == pytest.approx(math.exp(3.0), rel=1e-5)


def test_aggregation_modes() -> None:
    v, m = t([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]), t([[1, 1, 1], [1, 0, 0]])
    assert float(aggregate(v, m, "token-mean")) == pytest.approx(10 / 4)
    assert float(aggregate(v, m, "seq-mean-token-mean")) == pytest.approx((2 + 4) / 2)
    assert float(aggregate(v, m, "seq-mean-token-sum")) == pytest.approx((6 + 4) / 2)
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregate(v, m, "bogus")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4),
                          st.lists(st.floats(-5, 5), min_size=4, max_size=4)), min_size=1, max_size=8),
       st.sampled_from(["seq-mean-token-mean", "seq-mean-token-sum"]))
def test_episode_weighted_rows_count_each_episode_once(rows: list, mode: str) -> None:
    # rows: (episode, response length, values); weight 1/(rows of the episode) = mean of each episode's row means
    values = t([v for _, _, v in rows])
    mask = t([[1] * n + [0] * (4 - n) for _, n, _ in rows])
    count = {e: sum(1 for x, _, _ in rows if x == e) for e, _, _ in rows}
    got = aggregate(values, mask, mode, t([1 / count[e] for e, _, _ in rows]))
    per_row = [sum(v[:n]) / (n if mode == "seq-mean-token-mean" else 1) for _, n, v in rows]
    per_episode = [sum(r for r, (x, _, _) in zip(per_row, rows) if x == e) / count[e] for e in count]
    assert float(got) == pytest.approx(sum(per_episode) / len(per_episode), rel=1e-4, abs=1e-4)
    assert float(aggregate(values, mask, mode, torch.ones(len(rows)))) == pytest.approx(
        float(aggregate(values, mask, mode)), rel=1e-5, abs=1e-5)


def test_kl_estimators() -> None:
    logp, ref = t([0.0, -1.0]), t([-1.0, -1.0])
    assert kl_penalty(logp, ref, "k1").tolist() == pytest.approx([1.0, 0.0])
    assert kl_penalty(logp, ref, "k2").tolist() == pytest.approx([0.5, 0.0])
    assert kl_penalty(logp, ref, "low_var_kl").tolist() == pytest.approx([math.exp(-1) - 1 + 1, 0.0])


def test_value_loss_clipping() -> None:
    v, old, ret, m = t([[2.0]]), t([[0.0]]), t([[2.0]]), t([[1]])
    loss, info = value_loss(v, old, ret, m, clip=0.5)
    assert float(loss) == pytest.approx(0.5 * max(0.0, (0.5 - 2.0) ** 2))
    assert info["critic/values_mean"] == 2.0


def test_logprobs_and_entropy_of_uniform_logits() -> None:
    logits = torch.zeros(1, 2, 4)
    logp, ent = token_logprobs_entropy(logits, torch.tensor([[1, 3]]))
    assert logp.tolist()[0] == pytest.approx([math.log(0.25)] * 2)
    assert ent.tolist()[0] == pytest.approx([math.log(4)] * 2)


def test_observation_tokens_receive_no_gradient() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 11, requires_grad=True)
    targets = torch.randint(0, 11, (2, 6))
    mask = t([[0, 0, 1, 1, 0, 1], [0, 1, 0, 0, 0, 0]])  # 0 = prompt / observation tokens
    logp, ent = token_logprobs_entropy(logits, targets)
    loss, _ = policy_loss(logp, logp.detach() - 0.1, torch.randn(2, 6), mask)
    (loss - 0.01 * aggregate(ent, mask)).backward()
    grad = logits.grad.abs().sum(-1)
    assert (grad[mask == 0] == 0).all() and (grad[mask == 1] > 0).all()


def test_batch_adjustment_after_filtering() -> None:
    from ragen_plugins_torch.trainer import adjust_samples

    items = list(range(10))
    assert adjust_samples(items, 4, "none") == items
    assert adjust_samples(items, 4, "trim") == items[:8]
    dup = adjust_samples(items, 4, "duplicate", seed=1)
    assert len(dup) == 12 and dup[:10] == items and set(dup[10:]) <= set(items)
    short = adjust_samples(items[:3], 4, "trim")  # fewer than one mini-batch: padded, never trimmed to zero
    assert len(short) == 4 and short[:3] == [0, 1, 2]
    assert adjust_samples([], 4, "duplicate") == []
