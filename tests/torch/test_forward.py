"""The masked training forward equals the full one where it matters: values and gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ragen_plugins_torch.forward import (  # noqa: E402
    MIN_SHARED_PREFIX,
    common_prefix_length,
    full_logprobs,
    grouped_logprobs,
    masked_logprobs,
    shared_prefixes,
    supports_masked_head,
)

VOCAB = 97


@pytest.fixture(scope="module")
def model():
    config = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=True, pad_token_id=0)
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config).eval()


def _batch(data, lengths):
    width = max(lengths)
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    pos = torch.zeros((len(lengths), width - 1), dtype=torch.bool)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.tensor(data.draw(st.lists(st.integers(1, VOCAB - 1), min_size=n, max_size=n)))
        attn[i, :n] = 1
        for t in range(n - 1):
            pos[i, t] = data.draw(st.booleans())
    return ids, attn, pos


@settings(max_examples=25, deadline=None)
@given(data=st.data(), lengths=st.lists(st.integers(2, 40), min_size=1, max_size=4),
       temperature=st.sampled_from([1.0, 0.7]))
def test_masked_equals_full_at_the_selected_positions(model, data, lengths, temperature) -> None:
    ids, attn, pos = _batch(data, lengths)
    with torch.no_grad():
        want_lp, want_ent = full_logprobs(model, ids, attn, temperature)
        lp, ent = masked_logprobs(model, ids, attn, pos, temperature)
    torch.testing.assert_close(lp, want_lp * pos, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent, want_ent * pos, atol=1e-5, rtol=1e-5)
    assert (lp[~pos] == 0).all() and (ent[~pos] == 0).all()


def test_gradients_equal_the_full_computation(model) -> None:
    torch.manual_seed(1)
    ids = torch.randint(1, VOCAB, (3, 30))
    attn = torch.ones_like(ids)
    attn[2, 20:] = 0
    pos = torch.rand(3, 29) < 0.3
    pos[2, 19:] = False
    weights = torch.randn(3, 29)
    grads = []
    for fn in (lambda: full_logprobs(model, ids, attn), lambda: masked_logprobs(model, ids, attn, pos)):
        model.zero_grad()
        lp, ent = fn()
        ((lp * weights * pos).sum() + 0.1 * (ent * pos).sum()).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4, msg=name)


def test_models_with_logit_transforms_take_the_plain_path(model) -> None:
    assert supports_masked_head(model)

    class Softcapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model
            self.config = type("C", (), {"final_logit_softcapping": 30.0})()

        def forward(self, **kw):
            out = self.inner(**kw)
            out.logits = 30.0 * torch.tanh(out.logits / 30.0)
            return out

    capped = Softcapped()
    assert not supports_masked_head(capped)
    ids = torch.randint(1, VOCAB, (2, 12))
    attn = torch.ones_like(ids)
    pos = torch.ones(2, 11, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(masked_logprobs(capped, ids, attn, pos)[0], full_logprobs(capped, ids, attn)[0])


def _grouped_batch(data, system: list[int] | None = None):
    """Rows in clusters that share a prompt (as a GRPO group does), each row with its own right-padded answer
    tokens and scored positions only after the prompt; some rows alone, some prompts shorter than the minimum.
    With ``system``, every row starts with those tokens (a multi-turn batch's shared system prompt)."""
    system = system or []
    rows: list[tuple[list[int], list[bool]]] = []
    for k in range(data.draw(st.integers(1, 3))):
        # the first cluster always shares a long enough prompt; the others may be short or alone
        size = data.draw(st.integers(MIN_SHARED_PREFIX + 1, MIN_SHARED_PREFIX + 20) if k == 0 else st.integers(2, 40))
        prompt = system + data.draw(st.lists(st.integers(1, VOCAB - 1), min_size=size, max_size=size))
        for _ in range(data.draw(st.integers(2 if k == 0 else 1, 4))):
            answer = data.draw(st.lists(st.integers(1, VOCAB - 1), min_size=1, max_size=8))
            scored = [False] * (len(prompt) - 1) + [True] + [data.draw(st.booleans()) for _ in answer[1:]]
            rows.append((prompt + answer, scored))
    order = data.draw(st.permutations(range(len(rows))))
    rows = [rows[i] for i in order]
    width = max(len(r) for r, _ in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    pos = torch.zeros((len(rows), width - 1), dtype=torch.bool)
    for i, (r, scored) in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        attn[i, :len(r)] = 1
        pos[i, :len(scored)] = torch.tensor(scored)
    return ids, attn, pos


def _common_prefix_reference(ids: torch.Tensor, pos: torch.Tensor) -> int:
    """Token by token over plain lists: the longest run every row shares before every row's first scored column."""
    rows, scored = ids.tolist(), pos.tolist()
    if len(rows) < 2 or not all(any(r) for r in scored):
        return 0
    first = min(r.index(True) for r in scored)
    n = 0
    while n < first and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n if n >= MIN_SHARED_PREFIX else 0


@settings(max_examples=60, deadline=None)
@given(data=st.data(), system=st.integers(0, 30))
def test_common_prefix_length_matches_a_reference(data, system) -> None:
    ids, _, pos = _grouped_batch(data, [5] * system)
    if data.draw(st.booleans()):  # sometimes a row with nothing scored, or scored from its first columns
        pos[data.draw(st.integers(0, len(pos) - 1))] = data.draw(st.booleans())
    assert common_prefix_length(ids, pos) == _common_prefix_reference(ids, pos)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), system=st.sampled_from([0, MIN_SHARED_PREFIX, MIN_SHARED_PREFIX + 13]),
       temperature=st.sampled_from([1.0, 0.7]))
def test_grouped_with_a_common_system_prompt_equals_per_sequence(model, data, system, temperature) -> None:
    ids, attn, pos = _grouped_batch(data, list(range(3, 3 + system)))
    assert common_prefix_length(ids, pos) >= system or len(ids) == 1
    with torch.no_grad():
        want_lp, want_ent = masked_logprobs(model, ids, attn, pos, temperature)
        lp, ent = grouped_logprobs(model, ids, attn, pos, temperature)
    torch.testing.assert_close(lp, want_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent, want_ent, atol=1e-5, rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), temperature=st.sampled_from([1.0, 0.7]))
def test_grouped_equals_per_sequence(model, data, temperature) -> None:
    ids, attn, pos = _grouped_batch(data)
    assert any(length for _, length in shared_prefixes(ids, pos))
    with torch.no_grad():
        want_lp, want_ent = masked_logprobs(model, ids, attn, pos, temperature)
        lp, ent = grouped_logprobs(model, ids, attn, pos, temperature)
    torch.testing.assert_close(lp, want_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent, want_ent, atol=1e-5, rtol=1e-5)


def test_shared_prefixes_cluster_rows_with_the_same_prompt() -> None:
    p = list(range(1, MIN_SHARED_PREFIX + 5))
    ids = torch.tensor([p + [7, 8], [9] * len(p) + [7, 8], p + [5, 6], [3, 3] + [0] * (len(p))])
    pos = torch.zeros((4, ids.shape[1] - 1), dtype=torch.bool)
    pos[:3, len(p) - 1:] = True
    pos[3, 0] = True  # scored from its second token: a prefix too short to share
    assert shared_prefixes(ids, pos) == [([0, 2], len(p) - 1), ([1], 0), ([3], 0)]


def test_grouped_gradients_equal_the_per_sequence_ones(model) -> None:
    torch.manual_seed(2)
    prompt = torch.randint(1, VOCAB, (30,))
    ids = torch.cat([prompt.expand(4, -1), torch.randint(1, VOCAB, (4, 6))], 1)
    attn = torch.ones_like(ids)
    attn[1, 33:] = 0
    pos = torch.zeros((4, 35), dtype=torch.bool)
    pos[:, 29:] = True
    pos[1, 32:] = False
    _assert_grouped_gradients_equal(model, ids, attn, pos)


def test_grouped_gradients_with_a_common_prefix_clusters_and_lone_rows(model) -> None:
    """Every kind of pass at once: the batch's common prefix, a cluster continuing it, rows that share only it."""
    torch.manual_seed(3)
    system = torch.randint(1, VOCAB, (20,))
    group = torch.randint(1, VOCAB, (25,))
    rows = [torch.cat([system, group, torch.randint(1, VOCAB, (5,))]) for _ in range(3)]
    rows += [torch.cat([system, torch.randint(1, VOCAB, (n,))]) for n in (12, 30)]
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    pos = torch.zeros((len(rows), width - 1), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, :len(r)], attn[i, :len(r)] = r, 1
        pos[i, len(r) - 6 if i < 3 else 22:len(r) - 1] = True
    assert common_prefix_length(ids, pos) == 20
    assert [rows for rows, length in shared_prefixes(ids, pos) if length] == [[0, 1, 2]]
    _assert_grouped_gradients_equal(model, ids, attn, pos)


def _assert_grouped_gradients_equal(model, ids, attn, pos) -> None:
    """The parameter gradients of a weighted sum of log-probs and entropies: grouped as per sequence."""
    weights = torch.randn(pos.shape)
    grads = []
    for fn in (masked_logprobs, grouped_logprobs):
        model.zero_grad()
        lp, ent = fn(model, ids, attn, pos)
        ((lp * weights).sum() + 0.1 * ent.sum()).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-5, rtol=1e-4, msg=name)
