"""The collapse diagnostic through a scorer's ``score_matrix`` (the whole ℓ matrix in one call): the same metrics as
pair by pair through ``score``, the synthetic-policy results, errors on bad matrices, and the torch policy's fast
path against its own pair-by-pair path on a real (random) model."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.protocols import DiagnosticContext
from ragen_plugins_diagnostics.collapse import Collapse

from .helpers import TOK, CopyScorer, HashScorer, IgnoreScorer, copy_batch, random_context


def ctx(batch, scorer, step=1):
    return DiagnosticContext(batch=batch, step=step, scorer=scorer)


def family(metrics, name):
    prefix = f"collapse/{name}/"
    return {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}


class WithMatrix:
    """``score_matrix`` built from another scorer's ``score`` (sums per pair); ``score`` itself refuses, so a test
    fails if the diagnostic takes the pair-by-pair path."""

    tokenizer = TOK

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[tuple[int, int]] = []

    def score(self, prompts, continuations, batch_size=16):
        raise AssertionError("score() called although score_matrix() exists")

    def score_matrix(self, prompts, continuations):
        self.calls.append((len(prompts), len(continuations)))
        out = np.zeros((len(prompts), len(continuations)))
        for j, p in enumerate(prompts):
            rows = self.inner.score([p] * len(continuations), continuations)
            out[j] = [math.fsum(r) for r in rows]
        return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), pairs=st.sampled_from([1, 3, 8, 64]))
def test_score_matrix_gives_the_same_metrics_as_pairs(seed, pairs):
    context = random_context(seed)
    config = Collapse.config_cls(pairs=pairs)
    want = Collapse(config).compute(context)
    scorer = WithMatrix(HashScorer())
    got = Collapse(config).compute(ctx(context.batch, scorer, context.step))
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    samples = [family(want, f)["num_pairs"] for f in ("first_turn", "trajectory") if f"collapse/{f}/num_pairs" in want]
    assert len(scorer.calls) == sum(1 for n in samples if n > 0)  # one call per family with pairs


@pytest.mark.parametrize("name", ["first_turn", "trajectory"])
def test_copying_policy_through_score_matrix(name):
    m = family(Collapse().compute(ctx(copy_batch(8, 4, n_turns=3), WithMatrix(CopyScorer()))), name)
    n = m["num_prompts"]
    assert m["mi_seq_estimate"] == pytest.approx(math.log(n), abs=1e-9)
    assert m["mi_estimate"] == pytest.approx(math.log(n) - math.log(1 + (n - 1) * math.exp(-10)), abs=1e-9)
    assert m["retrieval_accuracy"] == 1.0


@pytest.mark.parametrize("name", ["first_turn", "trajectory"])
def test_ignoring_policy_through_score_matrix(name):
    m = family(Collapse().compute(ctx(copy_batch(8, 4, n_turns=3), WithMatrix(IgnoreScorer()))), name)
    n = m["num_prompts"]
    assert m["mi_estimate"] == pytest.approx(0.0, abs=1e-12)
    assert m["mi_seq_estimate"] == pytest.approx(0.0, abs=1e-12)
    assert m["retrieval_accuracy"] == pytest.approx(1 / n)


class BadMatrix:
    tokenizer = TOK

    def __init__(self, make) -> None:
        self.make = make

    def score_matrix(self, prompts, continuations):
        return self.make(len(prompts), len(continuations))


@pytest.mark.parametrize("make, match", [
    (lambda p, c: np.zeros((c, p)) if p != c else np.zeros((p, c + 1)), "shape"),
    (lambda p, c: np.zeros((p, c - 1)), "shape"),
    (lambda p, c: np.full((p, c), np.nan), "non-finite"),
    (lambda p, c: np.where(np.eye(p, c) > 0, -np.inf, -1.0), "non-finite"),
    (lambda p, c: [[-1.0] * c] * (p - 1) + [[-1.0] * (c + 1)], "matri"),
])
def test_bad_score_matrix_raises(make, match):
    with pytest.raises(ValueError, match=match):
        Collapse().compute(ctx(copy_batch(4, 2, n_turns=2), BadMatrix(make)))


# ------------------------------------------------------------------------------------------- the torch policy

try:
    import torch
    import transformers
except ImportError:  # the torch extra is optional; the tests above need none of it
    torch = transformers = None


@pytest.fixture
def one_thread():
    """A model this small gains nothing from intra-op threads, and on a shared, oversubscribed CPU the threads'
    barriers make each op many times slower; the numbers do not depend on it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class Compact:
    """``TOK`` with its code points renumbered 1..K (0 stays the end token), so a small model's vocabulary covers a
    test batch."""

    eos_token_id = pad_token_id = 0

    def __init__(self, batch) -> None:
        used = sorted({t for traj in batch for turn in traj.turns for t in (*turn.prompt_ids, *turn.response_ids)
                       if t})
        self.to_small = {t: k for k, t in enumerate(used, 1)}
        self.to_code = {k: t for t, k in self.to_small.items()}

    def ids(self, ids):
        return [self.to_small.get(t, 0) for t in ids]

    def decode(self, ids, skip_special_tokens=False):
        return TOK.decode([self.to_code.get(i, 0) for i in ids])

    def batch(self, batch):
        return attrs.evolve(batch, trajectories=[
            attrs.evolve(traj, turns=[attrs.evolve(turn, prompt_ids=self.ids(turn.prompt_ids),
                                                   response_ids=self.ids(turn.response_ids)) for turn in traj.turns])
            for traj in batch])


class PairsOnly:
    """The same policy without its fast path: the diagnostic falls back to ``score``."""

    def __init__(self, policy) -> None:
        self.policy, self.tokenizer = policy, policy.tokenizer

    def score(self, prompts, continuations, batch_size=16):
        return self.policy.score(prompts, continuations, batch_size=batch_size)


@pytest.mark.skipif(torch is None, reason="needs the torch extra")
def test_hf_policy_fast_path_matches_its_pair_path(one_thread):
    from ragen_plugins_torch.policy import HFPolicy

    original = copy_batch(3, 2, n_turns=2)
    tok = Compact(original)
    batch = tok.batch(original)
    config = transformers.Qwen2Config(
        vocab_size=len(tok.to_small) + 1, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=1024, tie_word_embeddings=True, pad_token_id=0,
        eos_token_id=0, bos_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.Qwen2ForCausalLM(config).eval()
    policy = HFPolicy(model, tok)
    policy.score_tokens, policy.score_pack_tokens = 600, 40  # several prompt groups and packs
    fast = Collapse().compute(ctx(batch, policy))
    slow = Collapse().compute(ctx(batch, PairsOnly(policy)))
    assert fast.keys() == slow.keys()
    assert fast["collapse/trajectory/num_prompts"] > 3
    for key, value in slow.items():
        assert fast[key] == pytest.approx(value, rel=1e-5, abs=1e-4), key
