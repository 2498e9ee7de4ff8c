"""``HFPolicy.score_matrix`` (each prompt encoded once, continuations packed after its KV cache) and ``HFPolicy.score``
against the obvious slow path: one full forward pass of ``prompt + continuation`` per pair, log-softmax, gather, sum."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ragen_plugins_torch.policy import HFPolicy  # noqa: E402

VOCAB = 61
PAD = 0
ATOL = 1e-4


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Models this small gain nothing from intra-op threads, and on a shared, oversubscribed CPU the threads' barriers
    make each op many times slower; the numbers do not depend on it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def qwen2(attn: str, seed: int = 0) -> object:
    config = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, pad_token_id=PAD,
        eos_token_id=1, bos_token_id=None, attn_implementation=attn)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.Qwen2ForCausalLM(config)
        with torch.no_grad():  # sharper than the default init, so log-probs depend strongly on the context
            for param in model.parameters():
                param.mul_(4.0 if param.dim() > 1 else 1.0)
    return model.eval()


def policy(model: object) -> HFPolicy:
    return HFPolicy(model, SimpleNamespace(pad_token_id=PAD, eos_token_id=1))


@pytest.fixture(scope="module")
def models() -> dict[str, object]:
    return {"sdpa": qwen2("sdpa"), "eager": qwen2("eager")}


def slow_token_logprobs(model: object, prompt: list[int], cont: list[int]) -> list[float]:
    """The obvious way: one forward pass over prompt + continuation, alone, no padding, no cache."""
    with torch.no_grad():
        ids = torch.tensor([prompt + cont])
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    return [float(logp[len(prompt) - 1 + t, tok]) for t, tok in enumerate(cont)]


def slow_matrix(model: object, prompts: list[list[int]], conts: list[list[int]]) -> np.ndarray:
    return np.array([[math.fsum(slow_token_logprobs(model, p, c)) for c in conts] for p in prompts])


tokens = st.integers(min_value=1, max_value=VOCAB - 1)
prompt_st = st.lists(tokens, min_size=1, max_size=14)
cont_st = st.lists(tokens, min_size=0, max_size=7)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompts=st.lists(prompt_st, min_size=1, max_size=5), conts=st.lists(cont_st, min_size=1, max_size=7),
       pack=st.integers(min_value=1, max_value=40), budget=st.integers(min_value=1, max_value=120),
       attn=st.sampled_from(["sdpa", "eager"]))
def test_score_matrix_equals_one_forward_per_pair(models, prompts, conts, pack, budget, attn):
    """Random prompts (length 1 included, different lengths padded together) and continuations (empty and
    length 1 included), any packing and any token budget (down to one prompt and one continuation per pass)."""
    pol = policy(models[attn])
    pol.score_pack_tokens, pol.score_tokens = pack, budget
    got = pol.score_matrix(prompts, conts)
    assert got.shape == (len(prompts), len(conts)) and got.dtype == np.float64
    np.testing.assert_allclose(got, slow_matrix(models[attn], prompts, conts), rtol=0, atol=ATOL)
    for i, c in enumerate(conts):
        if not c:
            assert (got[:, i] == 0.0).all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(prompt_st, st.lists(tokens, min_size=1, max_size=7)), min_size=1, max_size=9),
       batch_size=st.integers(min_value=1, max_value=5))
def test_score_equals_one_forward_per_pair(models, pairs, batch_size):
    pol = policy(models["sdpa"])
    rows = pol.score([p for p, _c in pairs], [c for _p, c in pairs], batch_size=batch_size)
    for (p, c), row in zip(pairs, rows):
        assert len(row) == len(c)
        np.testing.assert_allclose(row, slow_token_logprobs(models["sdpa"], p, c), rtol=0, atol=ATOL)


def test_a_realistic_shape(models):
    """RAGEN-like shape: long prompts with a shared prefix, many short continuations, several packs and prompt
    groups."""
    rng = np.random.default_rng(3)
    stem = rng.integers(1, VOCAB, size=60).tolist()
    prompts = [stem + rng.integers(1, VOCAB, size=int(rng.integers(1, 50))).tolist() for _ in range(6)]
    conts = [rng.integers(1, VOCAB, size=int(rng.integers(1, 24))).tolist() for _ in range(16)]
    pol = policy(models["sdpa"])
    pol.score_tokens, pol.score_pack_tokens = 256, 100  # several prompt groups and packs at this size
    np.testing.assert_allclose(pol.score_matrix(prompts, conts), slow_matrix(models["sdpa"], prompts, conts),
                               rtol=0, atol=ATOL)


def test_the_prompt_matters_and_the_matrix_is_not_transposed(models):
    # two prompts, three continuations: every entry differs, so a transposed or shuffled matrix cannot pass
    prompts, conts = [[5, 6, 7], [9]], [[3], [4, 4], [8, 2, 11]]
    got = policy(models["sdpa"]).score_matrix(prompts, conts)
    want = slow_matrix(models["sdpa"], prompts, conts)
    assert got.shape == (2, 3)
    assert len({round(float(v), 3) for v in want.ravel()}) == 6
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_mode_is_restored_and_gradients_are_off(models):
    model = qwen2("sdpa", seed=1)
    model.train()
    pol = policy(model)
    out = pol.score_matrix([[1, 2, 3]], [[4, 5]])
    assert model.training
    assert np.isfinite(out).all()
    model.eval()
    pol.score([[1, 2, 3]], [[4, 5]])
    assert not model.training


def test_empty_prompt_is_an_error(models):
    pol = policy(models["sdpa"])
    with pytest.raises(ValueError, match="prompt is empty"):
        pol.score_matrix([[1, 2], []], [[3]])
    with pytest.raises(ValueError, match="prompt is empty"):
        pol.score([[]], [[3]])


def test_nothing_to_score(models):
    pol = policy(models["sdpa"])
    assert pol.score_matrix([[1, 2]], []).shape == (1, 0)
    assert pol.score_matrix([], [[1, 2]]).shape == (0, 1)
    assert (pol.score_matrix([[1, 2], [3]], [[], []]) == 0.0).all()


class _NoMaskAttention(torch.nn.Module):
    """The same model behind a config that names an attention without custom 4-D masks (e.g. flash attention)."""

    def __init__(self, model: object) -> None:
        super().__init__()
        self.inner = model
        self.config = SimpleNamespace(_attn_implementation="flash_attention_2")
        self.calls: list[tuple[int, ...]] = []

    def forward(self, **kwargs: object) -> object:
        self.calls.append(tuple(kwargs["input_ids"].shape))
        assert "past_key_values" not in kwargs
        return self.inner(**kwargs)


def test_attention_without_4d_masks_falls_back_to_pairs(models):
    wrapped = _NoMaskAttention(models["sdpa"])
    prompts, conts = [[5, 6, 7], [9, 10]], [[3], [4, 4], []]
    got = policy(wrapped).score_matrix(prompts, conts)
    assert wrapped.calls  # went through score(), full sequences
    np.testing.assert_allclose(got, slow_matrix(models["sdpa"], prompts, conts), rtol=0, atol=ATOL)
