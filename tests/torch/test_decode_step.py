"""The in-place decode step (ragen_plugins_torch.decode_step) against the model's own forward: the same logits bit for
bit, step after step, for Qwen2 and Llama models over padded and unpadded batches; the sampler uses it only after its
run-time check, and falls back to the forward for any model it does not fit or that fails the check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragen_core.starpo.chat import ChatCodec  # noqa: E402
from ragen_core.starpo.rollout import GenerationRequest  # noqa: E402
from ragen_plugins_torch import decode_step, models  # noqa: E402
from ragen_plugins_torch.decode_step import DecodeStep, step_support, verified  # noqa: E402
from ragen_plugins_torch.forward import cache_layers  # noqa: E402
from ragen_plugins_torch.policy import HFPolicy  # noqa: E402

FUNCTION_FIXTURE = [HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    path = models.build_tiny_model(tmp_path_factory.mktemp("models"), hidden=32, intermediate=64)
    return models.load_model_and_tokenizer(str(path))


def _llama(bias: bool) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    config = LlamaConfig(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6,
                         num_key_value_heads=2, vocab_size=300, attention_bias=bias, mlp_bias=bias,
                         tie_word_embeddings=not bias, attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def llamas() -> list[Any]:
    return [_llama(False), _llama(True)]


@settings(max_examples=25, deadline=None, suppress_health_check=FUNCTION_FIXTURE)
@given(which=st.integers(0, 2), rows=st.integers(1, 9), width=st.integers(1, 40), padded=st.booleans(),
       steps=st.integers(1, 6), seed=st.integers(0, 2**16), gather=st.booleans(), data=st.data())
def test_the_step_gives_the_forwards_logits_bit_for_bit(tiny, llamas, which, rows, width, padded, steps, seed,
                                                        gather, data):
    """Prompts of drawn lengths (left padding, or none), then several steps of drawn tokens: every step's logits,
    and the keys, values and mask after the last, equal the model's own forward with a growing cache exactly. With
    ``gather`` the step's rows are drawn from the prompts' cache rows (requests sharing a prompt), gathered straight
    into its buffers, against the forward over the cache with those rows selected."""
    model = [tiny[0], *llamas][which]
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (rows, width), generator=gen)
    lengths = [data.draw(st.integers(1, width)) if padded else width for _ in range(rows)]
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - n for n in lengths])[:, None]).long()
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    with torch.no_grad():
        cache = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True).past_key_values
        index = torch.tensor(data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=9))) if gather else None
        if index is not None:
            layers = [(k.clone(), v.clone()) for k, v in cache_layers(cache)]
            cache.batch_select_indices(index)
            mask, positions, rows = mask[index], positions[index], len(index)
        stepper = DecodeStep(model, layers if index is not None else cache_layers(cache), mask, width + steps, index)
        pos = positions[:, -1:]
        for _ in range(steps):
            feed, pos = torch.randint(3, vocab, (rows, 1), generator=gen), pos + 1
            mask = torch.cat([mask, mask.new_ones((rows, 1))], 1)
            out = model(input_ids=feed, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                        logits_to_keep=1)
            cache = out.past_key_values
            assert torch.equal(stepper.step(feed, pos), out.logits)
    assert torch.equal(stepper.mask, mask)
    for (k, v), (sk, sv) in zip(cache_layers(cache), stepper.layers()):
        assert torch.equal(k, sk) and torch.equal(v, sv)


def test_support_covers_the_family_and_refuses_the_rest(tiny, llamas):
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    assert step_support(tiny[0]) is None and all(step_support(m) is None for m in llamas)
    assert "model type 'gpt2'" in step_support(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2)))
    eager = Qwen2ForCausalLM(Qwen2Config(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                         attn_implementation="eager"))
    assert "attention 'eager'" in step_support(eager)
    sliding = Qwen2ForCausalLM(Qwen2Config(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                           num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                           use_sliding_window=True, sliding_window=4, max_window_layers=0,
                                           attn_implementation="sdpa"))
    assert "sliding" in step_support(sliding)


def _pair(model: Any, tokenizer: Any) -> tuple[HFPolicy, HFPolicy]:
    """The native sampler and transformers' ``generate``, each a whole call in torch's thread count (the same
    reductions, so the same log-probs bit for bit)."""
    threads = torch.get_num_threads()
    return (HFPolicy(model, tokenizer, prefix_cache_mb=0, generation_threads=threads),
            HFPolicy(model, tokenizer, decoder="hf", generation_threads=threads))


def _samples_as_generate(model: Any, tokenizer: Any, reqs: list[GenerationRequest], verdict: bool | None) -> None:
    """Two calls (seeds 0 and 1), each sampling what ``generate`` samples from the same random state; after the
    first, the run-time check's verdict for ``model`` is ``verdict`` (None: never checked)."""
    native, reference = _pair(model, tokenizer)
    for seed in (0, 1):
        torch.manual_seed(seed)
        got = native.generate(reqs)
        assert verified(model) is verdict
        torch.manual_seed(seed)
        assert got == reference.generate(reqs)


def _requests(tokenizer: Any, temperature: float) -> list[GenerationRequest]:
    codec = ChatCodec(tokenizer)
    texts = ["State: #P_# go", "Turn 2:\nState:\n#__P#\nYou have 3 actions left.", "x"]
    return [GenerationRequest(prompt_ids=tuple(codec.prompt([{"role": "user", "content": t}])), max_new_tokens=9,
                              temperature=temperature) for t in texts for _ in range(3)]


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_the_sampler_checks_the_step_once_then_uses_it(tiny, temperature, monkeypatch):
    """A fresh model's first sampling call runs the check (the step then equals the forward: verified), and every
    call samples what transformers' ``generate`` samples from the same random state. After the check every step
    of a call runs in place, the first included (its prompts' shared cache rows gathered into the step's buffers),
    and none through the forward."""
    from ragen_plugins_torch import decoding

    model, tokenizer = models.load_model_and_tokenizer(str(models.build_tiny_model(hidden=32, intermediate=64)))
    reqs = _requests(tokenizer, temperature)
    assert verified(model) is None
    through_forward = []
    real = decoding._Forward.step
    monkeypatch.setattr(decoding._Forward, "step", lambda self, *a: (through_forward.append(1), real(self, *a))[1])
    _samples_as_generate(model, tokenizer, reqs, True)
    assert len(through_forward) == 2  # the first call's first step and its check, then none


def test_a_step_that_disagrees_with_the_forward_is_dropped(tiny, monkeypatch):
    """If the step's logits differ from the forward's (a model whose layers only look like the family's), the
    check records it, that call goes on through the forward, and the samples are still ``generate``'s."""
    model, tokenizer = models.load_model_and_tokenizer(str(models.build_tiny_model(hidden=32, intermediate=64)))
    reqs = _requests(tokenizer, 1.0)
    real_step = DecodeStep.step
    calls = []

    def off_by_a_little(self: DecodeStep, ids: Any, positions: Any) -> Any:
        calls.append(1)
        return real_step(self, ids, positions) + 1e-3

    monkeypatch.setattr(DecodeStep, "step", off_by_a_little)
    _samples_as_generate(model, tokenizer, reqs, False)
    assert len(calls) == 1  # only the checked step: the second call never builds a stepper
    assert decode_step._VERIFIED[model] is False


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_lora_model_samples_through_the_step(dtype):
    """The native trainer's LoRA models (PEFT wrappers, bfloat16 for SmolLM2): the step runs the wrapped model's
    layers (the LoRA projections included), passes the check, and samples what ``generate`` samples."""
    peft = pytest.importorskip("peft")
    model, tokenizer = models.load_model_and_tokenizer(str(models.build_tiny_model(hidden=32, intermediate=64)))
    model = model.to(getattr(torch, dtype))
    model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    for p in model.parameters():  # LoRA's B starts at zero: move it, so the adapters change the logits
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.2)
    assert step_support(model) is None
    reqs = _requests(tokenizer, 1.0)
    _samples_as_generate(model, tokenizer, reqs, True)


def test_a_model_outside_the_family_samples_through_its_forward(tiny):
    """Eager attention (not SDPA): no step is built or checked, and the samples are ``generate``'s."""
    from transformers import Qwen2ForCausalLM

    _model, tokenizer = tiny
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(tiny[0].config.__class__(**{**tiny[0].config.to_dict(),
                                                         "attn_implementation": "eager"})).eval()
    assert "eager" in step_support(model)
    reqs = _requests(tokenizer, 1.0)
    _samples_as_generate(model, tokenizer, reqs, None)


def test_the_later_steps_of_a_small_model_leave_the_noise_worker_a_core(tiny, monkeypatch):
    """With torch at two threads, a small model sampling at a temperature runs its steps after the first in one
    thread (the noise worker has the other core) and every other op in two; the thread count is restored after the
    call; greedy sampling, an explicit ``generation_threads``, the ``hf`` decoder and a model over the size limit
    keep torch's setting. The samples are the same tokens as a call in two threads throughout, log-probs to
    round-off (the reductions may split differently)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from ragen_plugins_torch.policy import _num_threads

    model, tokenizer = tiny
    seen: list[int] = []
    real_step = DecodeStep.step

    def counting(self: DecodeStep, ids: Any, positions: Any) -> Any:
        seen.append(torch.get_num_threads())
        return real_step(self, ids, positions)

    monkeypatch.setattr(DecodeStep, "step", counting)
    big = LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                       num_key_value_heads=1, vocab_size=HFPolicy.small_model // 64))
    with _num_threads(2):
        policy = HFPolicy(model, tokenizer, prefix_cache_mb=0)
        assert policy.step_threads(1.0) == 1 and policy.step_threads(0.0) is None
        assert HFPolicy(model, tokenizer, generation_threads=2).step_threads(1.0) is None
        assert HFPolicy(model, tokenizer, decoder="hf").step_threads(1.0) is None
        assert HFPolicy(big, tokenizer).step_threads(1.0) is None
        reqs = _requests(tokenizer, 1.0)
        torch.manual_seed(0)
        got = policy.generate(reqs)
        assert torch.get_num_threads() == 2 and seen and set(seen) == {1}
        torch.manual_seed(0)
        want = HFPolicy(model, tokenizer, prefix_cache_mb=0, generation_threads=2).generate(reqs)
        assert set(seen[len(seen) // 2:]) == {2}
    assert [r.token_ids for r in got] == [r.token_ids for r in want]
    for a, b in zip(got, want):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
