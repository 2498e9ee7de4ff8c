"""``HFPolicy``'s sampling fast paths against the plain code they replace: the stop-string scan (one cached decode per
token id, stop strings checked only after a token holding their last character) against the token-by-token decode,
the per-step log-prob/entropy pass against a log-softmax over the stacked logits, the flat left padding against
per-row assignment, the cached stop criterion against ``generate(stop_strings=...)``, and a whole ``generate`` call
against the previous implementation, bit for bit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ragen_core.starpo.chat import ChatCodec  # noqa: E402
from ragen_core.starpo.rollout import GenerationRequest, GenerationResult  # noqa: E402
from ragen_plugins_torch import models  # noqa: E402
from ragen_plugins_torch.losses import token_logprobs_entropy  # noqa: E402
from ragen_plugins_torch.policy import (  # noqa: E402
    MIN_COMMON_PROMPT,
    HFPolicy,
    _length_reference,
    _num_threads,
    common_prompt_prefix,
    pad_left,
    response_logprobs_entropy,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    path = models.build_tiny_model(tmp_path_factory.mktemp("models"), hidden=32, intermediate=64)
    return models.load_model_and_tokenizer(str(path))


# ------------------------------------------------------------------------------------------------ the stop scan

class PieceTokenizer:
    """Token i decodes to ``pieces[i]`` (any strings: empty, multi-character, longer than the scan's window)."""

    pad_token_id = None

    def __init__(self, pieces: list[str], eos: int | None) -> None:
        self.pieces, self.eos_token_id = pieces, eos

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(self.pieces[i] for i in ids)


STOPS = ["</answer>", ">", "", "ab", "é", "\ufffd", "</answer>x", "a" * 40]
PIECES = ["</", "answer", ">", "</answer>", "", "a", "b", "é", "\ufffd", " ", "x", "answer>", "</ans", "wer>",
          "a" * 35 + "</answer>", "</answer>" + "b" * 40, "q" * 50]


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=45)), min_size=1, max_size=12),
       data=st.data(), stop=st.lists(st.sampled_from(STOPS), max_size=3).map(tuple),
       eos=st.one_of(st.none(), st.integers(0, 11)))
def test_stop_scan_equals_token_by_token_decode(pieces, data, stop, eos):
    """Stop strings split across tokens, inside long tokens (where the 32-character window misses them, in both),
    repeated, empty; tokens decoding to nothing or to multi-byte characters; with and without an end token."""
    tok = PieceTokenizer(pieces, eos)
    tokens = data.draw(st.lists(st.integers(0, len(pieces) - 1), max_size=30))
    policy = HFPolicy(None, tok)
    assert policy._length(tokens, stop) == _length_reference(tok, tokens, stop)
    assert policy._length(tokens, stop) == _length_reference(tok, tokens, stop)  # from the filled cache


def test_stop_scan_worked_examples():
    tok = PieceTokenizer(["</", "answer", ">", " ok", "</answer>" + "b" * 33, "E"], eos=5)
    policy = HFPolicy(None, tok)
    assert policy._length([3, 0, 1, 2, 3], ("</answer>",)) == 4  # split over three tokens
    assert policy._length([3, 5, 0, 1, 2], ("</answer>",)) == 2  # the end token first
    assert policy._length([4, 3, 3], ("</answer>",)) == 3  # too deep inside a long token: missed, as before
    assert _length_reference(tok, [4, 3, 3], ("</answer>",)) == 3
    assert policy._length([3, 3], ()) == 2 and policy._length([3, 5, 3], ()) == 2


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), stop=st.lists(st.sampled_from(["</answer>", "é", ">", "\ufffd", "日本", "answer"]),
                                     min_size=1, max_size=2).map(tuple))
def test_stop_scan_on_the_tiny_tokenizer(tiny, data, stop):
    """Random ids (byte tokens that decode to replacement characters included) and encoded texts where the stop
    string comes as one token or in pieces, next to multi-byte characters."""
    _model, tokenizer = tiny
    policy = HFPolicy(None, tokenizer)
    vocab = len(tokenizer)
    words = st.sampled_from(["</answer>", "</", "answer", ">", "é", "日本語", "🙂", " Up", "<answer>", "\n", "x"])
    if data.draw(st.booleans()):
        tokens = data.draw(st.lists(st.integers(0, vocab - 1), max_size=30))
    else:
        tokens = [t for w in data.draw(st.lists(words, max_size=10)) for t in tokenizer.encode(w)]
    assert policy._length(tokens, stop) == _length_reference(tokenizer, tokens, stop)


# ------------------------------------------------------------------------------------------------ log-probs

@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 9), width=st.integers(0, 7), vocab=st.integers(2, 300), data=st.data(),
       temperature=st.sampled_from([1.0, 0.7, 1.3, 1e-9]), bf16=st.booleans(), threads=st.sampled_from([1, 2]))
def test_response_logprobs_equal_the_stacked_log_softmax_bit_for_bit(rows, width, vocab, data, temperature, bf16,
                                                                     threads):
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    dtype = torch.bfloat16 if bf16 else torch.float32
    steps = tuple((torch.randn(rows, vocab, generator=gen) * 4).to(dtype) for _ in range(width))
    targets = torch.randint(0, vocab, (rows, width), generator=gen)
    lengths = data.draw(st.lists(st.integers(0, width), min_size=rows, max_size=rows))
    with _num_threads(threads):
        logp, ent = response_logprobs_entropy(steps, targets, lengths, temperature)
    stacked = torch.stack(steps, 1) if steps else torch.zeros(rows, 0, 1)
    want_logp, want_ent = token_logprobs_entropy(stacked, targets, temperature)
    assert logp.shape == ent.shape == (rows, width)
    for i, n in enumerate(lengths):
        assert torch.equal(logp[i, :n], want_logp[i, :n]) and torch.equal(ent[i, :n], want_ent[i, :n])
        assert not logp[i, n:].any() and not ent[i, n:].any()


def test_num_threads_is_restored():
    before = torch.get_num_threads()
    with _num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), _num_threads(1):
        raise RuntimeError
    assert torch.get_num_threads() == before


# ------------------------------------------------------------------------------------------------ padding

def pad_left_reference(rows: list[list[int]], pad: int) -> tuple[Any, Any]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.tensor(r)
            mask[i, width - len(r):] = 1
    return ids, mask


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.integers(0, 5000), max_size=12), min_size=1, max_size=6), pad=st.integers(0, 9))
def test_pad_left_equals_per_row_assignment(rows, pad):
    ids, mask = pad_left(rows, pad)
    want_ids, want_mask = pad_left_reference(rows, pad)
    assert torch.equal(ids, want_ids) and torch.equal(mask, want_mask)
    assert ids.dtype == mask.dtype == torch.long


# ------------------------------------------------------------------------------------------------ generate

def generate_reference(policy: HFPolicy, reqs: list[GenerationRequest], stop_in_generate: bool = True
                       ) -> list[GenerationResult]:
    """``HFPolicy._generate`` before the fast paths: stop strings handed to ``generate``, the logits stacked, one
    log-softmax over them, the stop scan decoding token by token. ``stop_in_generate=False``: ``generate`` runs
    without them and each response is cut by the scan alone (the native loop's definition: a stop string counts in the
    response's own text; ``generate``'s criterion also matches one that starts in the prompt)."""
    req = reqs[0]
    ids, mask = pad_left_reference([list(r.prompt_ids) for r in reqs], policy.pad_id)
    greedy = req.temperature <= 0
    kwargs: dict[str, Any] = {
        "max_new_tokens": req.max_new_tokens, "do_sample": not greedy, "pad_token_id": policy.pad_id,
        "eos_token_id": policy.tokenizer.eos_token_id, "return_dict_in_generate": True, "output_logits": True,
        "stop_strings": (list(req.stop) or None) if stop_in_generate else None, "tokenizer": policy.tokenizer,
    }
    if not greedy:
        kwargs.update(temperature=req.temperature, top_p=req.top_p, top_k=req.top_k or None)
    with torch.no_grad():
        gen = policy.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    new = gen.sequences[:, ids.shape[1]:]
    logits = torch.stack(gen.logits, dim=1) if gen.logits else torch.zeros(len(reqs), 0, 1)
    logp, ent = token_logprobs_entropy(logits, new, 1.0 if greedy else req.temperature)
    out = []
    for i in range(len(reqs)):
        n = _length_reference(policy.tokenizer, new[i].tolist(), req.stop)
        out.append(GenerationResult(
            token_ids=tuple(new[i, :n].tolist()), logprobs=tuple(logp[i, :n].tolist()),
            finish_reason="length" if n == new.shape[1] and n == req.max_new_tokens else "stop",
            mean_entropy=sum(ent[i, :n].tolist()) / n if n else None))  # (the mean in double precision)
    return out


@pytest.mark.parametrize(("stop", "temperature", "top_k"), [
    (("</answer>",), 1.0, 0), ((" the", "e"), 1.0, 0), (("a", "</answer>"), 0.8, 20), ((), 1.0, 0),
    # greedy (the untrained model repeats <think>): a stop over two tokens, and, with the prompt's opening <think>,
    # one that starts in the prompt (generate stops there after one token, the native loop after two)
    (("<think><think>",), 0.0, 0),
    (("k><th",), 0.0, 0),  # one that ends inside a token: generate never stops on it, the scan cuts there
])
@pytest.mark.parametrize("decoder", ["native", "hf"])
def test_generate_equals_the_previous_implementation(tiny, stop, temperature, top_k, decoder):
    """Same seed, same requests, same thread count: the same ids, log-probs, entropies and finish reasons, bit for
    bit, from transformers' ``generate`` (``decoder="hf"``, its stop criterion built once and reused) and from the
    native sampling loop."""
    model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    texts = ["State: #P_# go", "Turn 2:\nState:\n#__P#\nYou have 3 actions left.", "é 日本 🙂 answer", "x"]
    reqs = [GenerationRequest(prompt_ids=tuple(codec.prompt([{"role": "user", "content": t}])), max_new_tokens=12,
                              temperature=temperature, top_k=top_k, stop=stop) for t in texts * 2]
    # the prompt-sharing prefill: the next test
    policy = HFPolicy(model, tokenizer, share_prompts=False, decoder=decoder, prefix_cache_mb=0,
                      generation_threads=torch.get_num_threads())  # one thread count for the whole call
    for seed in (0, 1):
        torch.manual_seed(seed)
        with _num_threads(policy.generation_threads):
            want = generate_reference(policy, reqs, stop_in_generate=decoder == "hf")
        torch.manual_seed(seed)
        got = policy.generate(reqs)
        assert got == want
    assert sum(len(r.token_ids) for r in got) < len(reqs) * 12 or not stop  # some stop early
    assert len(policy._stop_criteria) == (1 if stop and decoder == "hf" else 0)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_shared_prompt_prefill_samples_what_one_prefill_per_request_samples(tiny, temperature):
    """Requests that share a prompt (groups of 3, prompts of different lengths, so left padding) sampled from one
    prefill per prompt: the same tokens and finish reasons as a prefill per request (same seed), log-probs and
    entropies to float round-off; the prefill covers each distinct prompt once."""
    model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    texts = ["State: #P_# go", "Turn 2:\nState:\n#__P#\nYou have 3 actions left.", "x"]
    reqs = [GenerationRequest(prompt_ids=tuple(codec.prompt([{"role": "user", "content": t}])), max_new_tokens=10,
                              temperature=temperature) for t in texts for _ in range(3)]
    results = []
    for share in (False, True):
        policy = HFPolicy(model, tokenizer, share_prompts=share)
        prefilled: list[int] = []
        original = policy._prefill
        policy._prefill = (lambda ids, mask, root=0, prefilled=prefilled, original=original:
                           prefilled.append(ids.shape[0]) or original(ids, mask, root))
        torch.manual_seed(7)
        results.append(policy.generate(reqs))
        assert prefilled == ([len(texts)] if share else [])
    plain, shared = results
    for a, b in zip(plain, shared, strict=True):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
        assert a.mean_entropy == pytest.approx(b.mean_entropy, abs=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_common_system_prompt_prefilled_once_samples_the_same(tiny, temperature):
    """Distinct prompts behind one system prompt (a multi-turn batch: every turn of every episode): the common
    prefix runs once, each prompt continues from its cache with the padding between the two, and sampling gives the
    same tokens and finish reasons as plain left padding (same seed), log-probs and entropies to float round-off."""
    model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    system = ("You are solving the FrozenLake puzzle. Walk to the goal without stepping into a hole. "
              "Your available actions are: Left, Down, Right, Up")
    texts = ["Turn 1:\nState:\n_P_\n_GO", "Turn 3:\nState:\n___\n_GO\n__P\nYou have 3 actions left.", "x",
             "Turn 2:\nState:\nP__"]
    reqs = [GenerationRequest(prompt_ids=tuple(codec.prompt([{"role": "system", "content": system},
                                                             {"role": "user", "content": t}])),
                              max_new_tokens=10, temperature=temperature) for t in texts for _ in range(1 + (t == "x"))]
    root = common_prompt_prefix(list(dict.fromkeys(r.prompt_ids for r in reqs)))
    assert root >= MIN_COMMON_PROMPT
    results, roots = [], []
    for share in (False, True):
        policy = HFPolicy(model, tokenizer, share_prompts=share)
        original = policy._prefill
        policy._prefill = lambda ids, mask, root=0, original=original: roots.append(root) or original(ids, mask, root)
        torch.manual_seed(11)
        results.append(policy.generate(reqs))
    assert roots == [root]  # sharing off: no prefill at all; on: one, with the common prefix
    plain, shared = results
    for a, b in zip(plain, shared, strict=True):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
        assert a.mean_entropy == pytest.approx(b.mean_entropy, abs=1e-5)


@given(st.lists(st.lists(st.integers(0, 3), max_size=30), min_size=0, max_size=5), st.integers(0, 25))
def test_common_prompt_prefix_matches_a_reference(tails, shared):
    prompts = [tuple([9] * shared + t) for t in tails]
    want = 0
    if len(prompts) >= 2:
        limit = min(map(len, prompts)) - 2
        while want < limit and len({p[want] for p in prompts}) == 1:
            want += 1
        want = want if want >= MIN_COMMON_PROMPT else 0
    assert common_prompt_prefix(prompts) == want


def test_generate_counts_tokens_and_restores_training_mode(tiny):
    model, tokenizer = tiny
    policy = HFPolicy(model, tokenizer)
    model.train()
    try:
        res = policy.generate([GenerationRequest(prompt_ids=(5, 6, 7), max_new_tokens=4, stop=("</answer>",))])
        assert model.training and policy.generated_tokens == len(res[0].token_ids)
    finally:
        model.eval()


def test_codec_memo_on_the_tiny_tokenizer(tiny):
    """The memoised prompt and continuation ids equal rendering and encoding afresh with the real chat template."""
    _model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    messages = [{"role": "system", "content": "You're a helpful assistant."}, {"role": "user", "content": "é 日本"}]
    want = codec.encode(codec.render(messages, generation=True) + codec.open_tag)
    assert codec.prompt(messages) == want and codec.prompt([dict(m) for m in messages]) == want
    user = "Turn 2:\nState:\n#P# é"
    full = codec.render([*codec._probe, {"role": "user", "content": user}], generation=True)
    tail = codec.encode(full[len(codec._with_reply):] + codec.open_tag)
    for _ in range(2):  # computed, then from the memo
        assert codec.continuation([5, tokenizer.eos_token_id], user) == codec.close_ids[1:] + tail
        assert codec.continuation([5], user) == codec.close_ids + tail


LINE_PARTS = ["\n", " ", " \n", "\n\n", "\r\n", ".\n", "\t\n", ":\n  ", "x\nY", "1\n2", "'s\n", "Turn 2:\nState:\n#P_#"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.one_of(st.text(max_size=30), st.sampled_from(
    ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</answer>", "<answer", "|>", *LINE_PARTS])),
    max_size=8))
def test_codec_encodes_with_the_rust_backend_as_the_tokenizer_does(tiny, parts):
    """The codec's encode goes to the fast tokenizer's Rust ``encode`` piece by piece between the added tokens, and
    a new piece line by line, each piece and line memoised: the same ids as the tokenizer's own ``encode(text,
    add_special_tokens=False)`` on any text, special tokens, their fragments, whitespace and newlines around them
    and unicode included, from a fresh memo and from a filled one (the pieces of the same text, then the text
    again)."""
    _model, tokenizer = tiny
    codec = ChatCodec(tokenizer)
    assert codec._backend is not None and codec._split is not None and codec._lines
    text = "".join(parts)
    want = tokenizer.encode(text, add_special_tokens=False)
    assert codec.encode(text) == want
    for part in parts:
        assert codec.encode(part) == tokenizer.encode(part, add_special_tokens=False)
    assert codec.encode(text) == want


def _chatml_tokenizer(pre_tokenizer: Any) -> Any:
    """A small byte-level BPE tokenizer with ``pre_tokenizer`` and a ChatML template, trained here."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as token_models
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(token_models.BPE())
    backend.pre_tokenizer, backend.decoder = pre_tokenizer, decoders.ByteLevel()
    corpus = ["Turn 1:\nState:\n_P_\nO_G\nYou have 3 actions left. Always output: <answer> [your answer] </answer>.",
              "Reward:\n0.5\n\nLeft || Right\r\n 'sx 12 345 \t\n é 日本 語"] * 20
    backend.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + "
                               "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}"
                               "{{ '<|im_start|>assistant\n' }}{% endif %}")
    return tokenizer


@pytest.mark.parametrize(("kind", "lines"), [("qwen2", True), ("gpt2", False), ("prefix space", False),
                                           ("no split", False)])
@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.one_of(st.text(max_size=20), st.sampled_from(["<|im_end|>", *LINE_PARTS])), max_size=8))
def test_codec_encodes_line_by_line_only_after_a_pre_tokenizer_that_cuts_there(kind, lines, parts):
    """Qwen2's split pattern ends a pre-token after every newline followed by a non-space, and a line alone
    pre-tokenizes as in the whole text: the codec encodes new pieces line by line. GPT-2's byte-level regex does
    not (alone, a line's trailing " \\n" is one pre-token), nor does a pre-tokenizer that adds a prefix space to
    each text or never splits (a whole piece is one word to BPE): whole pieces. The tokenizer's ids either way."""
    from tokenizers import Regex, pre_tokenizers

    from ragen_core.starpo.chat import _LINE_SAFE_SPLITS

    qwen2 = min(_LINE_SAFE_SPLITS, key=len)  # (the other is Llama 3's: digits in threes)
    pre = {"qwen2": pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(qwen2), behavior="isolated"),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
           "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
           "prefix space": pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
           "no split": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)}[kind]
    tokenizer = _TOKENIZERS[kind] if kind in _TOKENIZERS else _TOKENIZERS.setdefault(kind, _chatml_tokenizer(pre))
    codec = ChatCodec(tokenizer)
    assert codec._split is not None and codec._lines is lines
    text = "".join(parts)
    for _ in range(2):
        assert codec.encode(text) == tokenizer.encode(text, add_special_tokens=False)


_TOKENIZERS: dict[str, Any] = {}


def test_line_safety_needs_a_known_split_before_the_byte_mapping():
    """A known split pattern cuts at newlines only where it sees them: before the byte-level mapping (after it, a
    newline is the symbol ``Ċ``). Unknown pre-tokenizers (Metaspace, an unknown pattern) and per-word normalizers
    are refused."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    from ragen_core.starpo.chat import _LINE_SAFE_SPLITS, _line_safe

    class Backend:
        def __init__(self, pre: Any, norm: Any = None) -> None:
            self.pre_tokenizer, self.normalizer = pre, norm

    split = pre_tokenizers.Split(Regex(min(_LINE_SAFE_SPLITS, key=len)), behavior="isolated")
    mapping = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    assert _line_safe(Backend(pre_tokenizers.Sequence([split, mapping]), normalizers.NFC()))
    assert _line_safe(Backend(pre_tokenizers.Sequence([pre_tokenizers.Digits(True), split, mapping])))
    assert not _line_safe(Backend(pre_tokenizers.Sequence([mapping, split])))
    assert not _line_safe(Backend(pre_tokenizers.Metaspace()))
    assert not _line_safe(Backend(pre_tokenizers.Split(Regex(r"\s+"), behavior="isolated")))
    assert not _line_safe(Backend(pre_tokenizers.Sequence([split, mapping]), normalizers.Strip()))


def test_codec_encodes_whole_texts_when_an_added_token_strips_its_neighbours(tmp_path):
    """An added token with ``lstrip`` takes the whitespace before it: the pieces between added tokens no longer
    encode independently, so the codec encodes whole texts (and still gives the tokenizer's ids)."""
    from tokenizers import AddedToken
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(models.build_tiny_model(tmp_path / "m", hidden=32, intermediate=64)))
    tokenizer.add_tokens([AddedToken("<act>", lstrip=True)])
    codec = ChatCodec(tokenizer)
    assert codec._backend is not None and codec._split is None
    text = "Turn 1 <act> Left   <act>\n"
    assert codec.encode(text) == tokenizer.encode(text, add_special_tokens=False)


def test_codec_without_a_rust_backend_uses_the_tokenizer():
    from ragen_core.starpo.chat import TextTokenizer

    codec = ChatCodec(TextTokenizer())
    assert codec._backend is None and codec.encode("ab") == [97, 98]
