"""Prompts, chat rendering and response parsing (RAGEN's "full" context format, token-exact).

The system message carries the instruction, the symbol legend and the valid actions; each user message carries the
turn number, the state, the actions left, the required format and the response budget (after the previous turn's
reward and, when that turn produced no valid action, a warning). The generation prompt is the chat template's, then
the literal ``<think>`` (or ``<answer>`` without thinking), so the model continues inside the tag.

:class:`ChatCodec` turns messages into token ids. Assistant turns are never re-rendered: the training sequence is
the sampled ids, spliced with the template's ids for the closing of the assistant turn and the next user turn.
"""

from __future__ import annotations

import contextlib
import re
from array import array
from typing import Any, Protocol

import attrs

__all__ = ["ChatCodec", "ChatTokenizer", "ParsedResponse", "TextTokenizer", "parse_response", "system_message",
           "user_message"]


class ChatTokenizer(Protocol):
    """The tokenizer interface the rollout loop needs (a Hugging Face tokenizer satisfies it)."""

    eos_token_id: Any

    def apply_chat_template(self, conversation: list[dict[str, str]], *, add_generation_prompt: bool = False,
                            tokenize: bool = False) -> Any: ...

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str: ...


def system_message(env: Any, *, max_actions_per_turn: int, action_sep: str) -> str:
    """The system prompt: assistant line, instruction, legend, valid actions (RAGEN's layout)."""
    parts = ["You're a helpful assistant. " + str(env.instruction).strip()]
    legend = getattr(env, "legend", None) or {}
    if legend:
        parts.append("The meaning of each symbol in the state is:\n" + ", ".join(f"{k}: {v}" for k, v in legend.items()))
    names = getattr(env, "action_names", None)
    if names:
        parts.append(f"Your available actions are:\n{', '.join(names)}\nYou can make up to {max_actions_per_turn} "
                     f"actions, separated by the action separator \" {action_sep} \"")
    return "\n".join(parts)


def user_message(turn: int, observation: str, actions_left: int, *, max_new_tokens: int, think: bool,
                 previous_reward: float | None = None, previous_invalid: bool = False) -> str:
    """One user turn: previous reward and warning, turn number, state, actions left, format, budget."""
    lines = []
    if previous_reward is not None:
        lines.append(f"Reward:\n{previous_reward:g}")
    if previous_invalid:
        lines.append("Your previous response had no valid action, so the state did not change.")
    fmt = ("<think> [Your thoughts] </think> <answer> [your answer] </answer>" if think
           else "<answer> [your answer] </answer>")
    lines += [f"Turn {turn}:", "State:", observation, f"You have {actions_left} actions left. Always output: {fmt} "
              f"with no extra text. Strictly follow this format. Max response length: {max_new_tokens} tokens."]
    return "\n".join(lines)


@attrs.frozen
class ParsedResponse:
    """A parsed assistant turn. ``format_ok`` is False when no think/answer block matched."""

    reasoning: str
    actions: tuple[str, ...]
    dropped: tuple[str, ...]
    format_ok: bool

    @property
    def penalised(self) -> bool:
        """RAGEN's format penalty applies: no match, no valid action, or an action was dropped."""
        return not self.format_ok or not self.actions or bool(self.dropped)


_THINK = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.S)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def parse_response(text: str, *, think: bool = True, action_sep: str = "||", max_actions: int = 2,
                   valid_actions: tuple[str, ...] | None = None) -> ParsedResponse:
    """Parse ``text`` (the generated text with the prompt's opening tag prepended).

    First match of think-then-answer (or answer alone without thinking); actions split on ``action_sep``, stripped,
    empties dropped; names matched case-insensitively to ``valid_actions`` (unknown ones dropped); at most
    ``max_actions`` kept. Never raises.
    """
    match = (_THINK if think else _ANSWER).search(text)
    if match is None:
        return ParsedResponse("", (), (), False)
    reasoning, answer = (match.group(1), match.group(2)) if think else ("", match.group(1))
    raw = [a.strip() for a in answer.split(action_sep) if a.strip()]
    actions, dropped = [], []
    lookup = {a.lower(): a for a in valid_actions} if valid_actions else None
    for a in raw:
        if lookup is None:
            actions.append(a)
        elif a.lower() in lookup:
            actions.append(lookup[a.lower()])
        else:
            dropped.append(a)
    return ParsedResponse(reasoning.strip(), tuple(actions[:max_actions]), tuple(dropped), True)


#: the split patterns under which a newline followed by a non-space always ends a pre-token, and a line's trailing
#: whitespace run pre-tokenizes alike at the end of the line alone (``\s*[\r\n]+`` takes it before any alternative
#: that looks ahead): the Qwen2 and the Llama 3 patterns. Not GPT-2's byte-level regex: alone, a line's trailing
#: ``" \n"`` is one pre-token (``\s+(?!\S)`` at the end of the text), in the whole text two.
_LINE_SAFE_SPLITS = frozenset(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}" + n + r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    for n in ("", "{1,3}"))
_LINE_END = re.compile(r"(?<=\n)(?=\S)")


def _line_safe(backend: Any) -> bool:
    """Whether a fast tokenizer's pipeline ends a pre-token after every newline followed by a non-space, so a text
    encoded line by line (cut there) gives the ids of the whole: a per-character normalizer (or none), and
    pre-tokenizers of which one is such a splitter and none adds a prefix space or joins across a newline."""
    import json

    def state(component: Any) -> Any:
        return None if component is None else json.loads(component.__getstate__())

    def splits(d: Any) -> bool | None:  # True: a safe splitter; False: harmless; None: unknown
        kind = d.get("type")
        if kind == "Sequence":  # (a split after the byte-level mapping would see its symbols, not newlines)
            found, kinds = [splits(x) for x in d.get("pretokenizers", [])], [x.get("type") for x in d["pretokenizers"]]
            late = "ByteLevel" in kinds and "Split" in kinds[kinds.index("ByteLevel"):]
            return None if None in found or late else any(found)
        if kind == "ByteLevel":
            return None if d.get("add_prefix_space") or d.get("use_regex") else False
        if kind == "Split":
            safe = d.get("pattern", {}).get("Regex") in _LINE_SAFE_SPLITS and d.get("behavior") == "Isolated" \
                and not d.get("invert")
            return True if safe else None
        return False if kind == "Digits" else None

    def per_char(d: Any) -> bool:
        return d is None or d.get("type") in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase") or (
            d.get("type") == "Sequence" and all(per_char(x) for x in d.get("normalizers", [])))

    try:
        pre, norm = state(backend.pre_tokenizer), state(backend.normalizer)
    except Exception:
        return False
    return pre is not None and splits(pre) is True and per_char(norm)


class ChatCodec:
    """Token ids of prompts and turn deltas, from a tokenizer's chat template.

    ``prompt(messages)`` renders a conversation with the generation prompt and the opening tag; ``continuation(
    response_ids, user)`` gives the ids that follow a sampled assistant response: the template's closing of the
    assistant turn (minus an end token the model already produced), the next user turn, the generation prompt
    and the opening tag.

    Both are memoised (rendering and encoding are pure functions of the messages, which the splicing already relies
    on): the members of a group share their first prompt, and equal states after equal actions give equal next user
    turns; so is :meth:`read_response` (decoding and parsing an answer). Each table holds at most
    :attr:`cache_size` entries (ids stored as 8-byte arrays) and is emptied when full.
    """

    #: the most entries of each memo table (whole prompts by messages, continuation tails by user text)
    cache_size: int = 1024

    def __init__(self, tokenizer: ChatTokenizer, *, think: bool = True) -> None:
        self.tokenizer = tokenizer
        self.open_tag = "<think>" if think else "<answer>"
        probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        head = self.render(probe, generation=True)
        self._with_reply = self.render([*probe, {"role": "assistant", "content": "A"}], generation=False)
        if not self._with_reply.startswith(head + "A"):
            raise ValueError("the chat template does not render an assistant reply verbatim after the generation "
                             "prompt; ragen cannot splice sampled tokens into it")
        self._probe = [*probe, {"role": "assistant", "content": "A"}]
        self._backend: Any = None
        self._split: tuple[Any, dict[str, int]] | None = None
        self._pieces: dict[str, array[int]] = {}
        backend: Any = getattr(getattr(tokenizer, "_tokenizer", None), "encode", None)
        with contextlib.suppress(Exception):  # any doubt (no Rust encode, other ids): the tokenizer's own encode
            if list(backend(self._with_reply, add_special_tokens=False).ids) == self.encode(self._with_reply):
                self._backend = backend
        self._lines = False
        with contextlib.suppress(Exception):
            self._split = self._splitter()
        with contextlib.suppress(Exception):
            self._lines = self._lines_probe()
        self.close_ids = self.encode(self._with_reply[len(head) + 1:])
        self._prompts: dict[Any, array[int]] = {}
        self._tails: dict[str, array[int]] = {}
        self._responses: dict[Any, tuple[str, ParsedResponse]] = {}

    def _splitter(self) -> tuple[Any, dict[str, int]] | None:
        """A pattern that cuts text at the tokenizer's added tokens (``<|im_start|>`` ...) and their ids, where
        encoding the text between them piece by piece gives the ids of the whole text: the tokenizer splits at
        added tokens before anything else, unless one strips its neighbours' whitespace or must stand alone as a
        word; checked on a probe of every added token between spaces, newlines and words. None: encode whole."""
        added = getattr(self.tokenizer, "added_tokens_decoder", None)
        if self._backend is None or not isinstance(added, dict) or not added \
                or any(getattr(t, a, False) for t in added.values() for a in ("lstrip", "rstrip", "single_word")):
            return None
        ids = {str(t.content): i for i, t in added.items()}
        split = (re.compile("(" + "|".join(re.escape(c) for c in sorted(ids, key=len, reverse=True)) + ")"), ids)
        probe = " a" + "".join(f"{c} b\n{c}c{c}" for c in ids) + "\n d " + self._with_reply
        whole = list(self._backend(probe, add_special_tokens=False).ids)
        return split if self._encode_pieces(probe, split) == whole else None

    def _lines_probe(self) -> bool:
        """Whether the text between added tokens may be encoded line by line (:func:`_line_safe`), checked on a probe
        of newlines after words, punctuation, spaces, digits and other newlines."""
        split = self._split
        if split is None or not _line_safe(getattr(self.tokenizer, "_tokenizer", None)):
            return False
        probe = "a\nb.\nC \nd\n\ne\r\nf:\n  g\n \nh 1\n2 é\n日本\n語 x,\n-y\t\nz 's\n'd " + self._with_reply
        self._lines = True
        try:
            return self._encode_pieces(probe, split) == list(self._backend(probe, add_special_tokens=False).ids)
        finally:  # the caller sets the outcome; a probe that raises leaves whole pieces
            self._lines = False
            self._pieces.clear()

    def render(self, messages: list[dict[str, str]], *, generation: bool) -> str:
        """The chat template's text for ``messages``."""
        return str(self.tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False))

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (no special tokens added); through a fast tokenizer's Rust ``encode``
        (``tokenizer._tokenizer``) when it gave the tokenizer's own ids on the template's probe: the Python layers
        around it are about 40% of an encode's time for a ~300-character turn. Where :meth:`_splitter` allows it,
        the text is cut at the added tokens and each piece's ids are memoised: a windowed prompt repeats the system
        prompt and earlier turns, which are then encoded once. Where :meth:`_lines_probe` allows it, a new piece is
        encoded line by line, each line memoised: a new turn's text repeats most of its lines (the instructions, the
        format, rows of a grid)."""
        if self._split is not None:
            return self._encode_pieces(text, self._split)
        if self._backend is not None:
            return list(self._backend(text, add_special_tokens=False).ids)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _encode_pieces(self, text: str, split: tuple[Any, dict[str, int]]) -> list[int]:
        """``text``'s ids as the added tokens' ids and, between them, each piece's ids (memoised)."""
        pattern, added = split
        ids: list[int] = []
        for k, piece in enumerate(pattern.split(text)):
            if k % 2:
                ids.append(added[piece])
            elif piece:
                known = self._pieces.get(piece)
                if known is None:
                    known = self._encode_lines(piece) if self._lines else \
                        array("q", self._backend(piece, add_special_tokens=False).ids)
                    self._remember(self._pieces, piece, known)
                ids += known
        return ids

    def _encode_lines(self, text: str) -> array[int]:
        """``text``'s ids as its lines' ids (cut after a newline followed by a non-space), each line memoised."""
        ids = array("q")
        for line in _LINE_END.split(text):
            known = self._pieces.get(line)
            if known is None:
                known = array("q", self._backend(line, add_special_tokens=False).ids)
                self._remember(self._pieces, line, known)
            ids += known
        return ids

    def prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Ids of a whole prompt ending in the generation prompt and the opening tag."""
        try:
            key: Any = tuple(tuple(m.items()) for m in messages)
            ids = self._prompts.get(key)
        except TypeError:  # a message with an unhashable value: not memoised
            key = ids = None
        if ids is None:
            ids = array("q", self.encode(self.render(messages, generation=True) + self.open_tag))
            if key is not None:
                self._remember(self._prompts, key, ids)
        return ids.tolist()

    def continuation(self, response_ids: list[int], user: str) -> list[int]:
        """Ids that follow a sampled response: closing, the next user turn, generation prompt, opening tag."""
        close = list(self.close_ids)
        if close and response_ids and response_ids[-1] == close[0]:
            close = close[1:]
        tail = self._tails.get(user)
        if tail is None:
            full = self.render([*self._probe, {"role": "user", "content": user}], generation=True)
            tail = array("q", self.encode(full[len(self._with_reply):] + self.open_tag))
            self._remember(self._tails, user, tail)
        return close + tail.tolist()

    def read_response(self, ids: list[int], *, think: bool, action_sep: str, max_actions: int,
                      valid_actions: tuple[str, ...] | None) -> tuple[str, ParsedResponse]:
        """The text of sampled ``ids`` (special tokens kept) and :func:`parse_response` of it after the opening tag,
        memoised by the ids and the options (the members of a group often answer alike)."""
        key = (tuple(ids), think, action_sep, max_actions, valid_actions)
        known = self._responses.get(key)
        if known is None:
            text = self.tokenizer.decode(list(ids), skip_special_tokens=False)
            known = (text, parse_response(self.open_tag + text, think=think, action_sep=action_sep,
                                          max_actions=max_actions, valid_actions=valid_actions))
            self._remember(self._responses, key, known)
        return known

    def _remember(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if len(table) >= self.cache_size:
            table.clear()
        table[key] = value


class TextTokenizer:
    """A character-level tokenizer with a ChatML template (id = code point): for scripted policies and tests."""

    eos_token_id = 0
    pad_token_id = 0

    def apply_chat_template(self, conversation: list[dict[str, str]], *, add_generation_prompt: bool = False,
                            tokenize: bool = False) -> Any:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return self.encode(text) if tokenize else text

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids if i > 0)
