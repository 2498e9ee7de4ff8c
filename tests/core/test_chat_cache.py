"""``ChatCodec``'s memo tables: memoised prompts and continuations equal rendering and encoding afresh, the returned
lists are the caller's own, the tables are bounded, and unhashable messages are rendered without the memo."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_core.starpo.chat import ChatCodec, TextTokenizer, parse_response


class CountingTokenizer(TextTokenizer):
    """A :class:`TextTokenizer` that counts template renders and encodes."""

    def __init__(self) -> None:
        self.renders = self.encodes = 0

    def apply_chat_template(self, conversation: list[dict[str, str]], **kw: Any) -> Any:
        self.renders += 1
        return super().apply_chat_template(conversation, **kw)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        self.encodes += 1
        return super().encode(text, add_special_tokens)


def fresh_prompt(codec: ChatCodec, messages: list[dict[str, str]]) -> list[int]:
    return codec.encode(codec.render(messages, generation=True) + codec.open_tag)


def fresh_continuation(codec: ChatCodec, response_ids: list[int], user: str) -> list[int]:
    close = list(codec.close_ids)
    if close and response_ids and response_ids[-1] == close[0]:
        close = close[1:]
    full = codec.render([*codec._probe, {"role": "user", "content": user}], generation=True)
    return close + codec.encode(full[len(codec._with_reply):] + codec.open_tag)


texts = st.text(alphabet=st.sampled_from("ab é\n<>|/日"), max_size=12)
messages_st = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                              "content": texts}), min_size=1, max_size=4)


answer_chars = st.sampled_from([*"ab |", "<answer>", "</answer>", "<think>", "</think>", "||", "Left", "up"])
answers = st.lists(answer_chars, max_size=8).map(lambda parts: [ord(c) for c in "".join(parts)])
read_options = st.fixed_dictionaries({"think": st.booleans(), "action_sep": st.sampled_from(["||", "|"]),
                                      "max_actions": st.integers(1, 3),
                                      "valid_actions": st.sampled_from([None, ("Left", "Up"), ("a", "b")])})


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(st.one_of(st.tuples(st.just("prompt"), messages_st),
                                st.tuples(st.just("continuation"), st.tuples(
                                    st.lists(st.integers(0, 130), max_size=4), texts)),
                                st.tuples(st.just("read"), st.tuples(answers, read_options))), max_size=12),
       think=st.booleans(), size=st.integers(1, 4))
def test_memoised_codec_equals_rendering_afresh(calls, think, size):
    """Any sequence of calls (repeats included, tables small enough to be emptied in between) gives what rendering
    and encoding (decoding and parsing, for an answer) each time gives, and a caller changing a returned list
    changes nothing later."""
    codec = ChatCodec(TextTokenizer(), think=think)
    codec.cache_size = size
    for kind, arg in calls * 2:
        if kind == "read":
            ids, options = arg
            text = codec.tokenizer.decode(ids)
            assert codec.read_response(ids, **options) == (text, parse_response(codec.open_tag + text, **options))
            continue
        if kind == "prompt":
            got, want = codec.prompt(arg), fresh_prompt(codec, arg)
        else:
            got, want = codec.continuation(*arg), fresh_continuation(codec, *arg)
        assert got == want
        got.append(-1)  # the caller's own list
    assert len(codec._prompts) <= size and len(codec._tails) <= size and len(codec._responses) <= size


def test_memo_renders_once_per_distinct_input():
    tok = CountingTokenizer()
    codec = ChatCodec(tok)
    base = tok.renders, tok.encodes
    system = {"role": "system", "content": "S" * 50}
    for _ in range(8):  # a group: every member renders the same first prompt
        codec.prompt([dict(system), {"role": "user", "content": "Turn 1"}])
    for user in ["Turn 2: a", "Turn 2: b", "Turn 2: a", "Turn 2: a"]:
        codec.continuation([104, 105], user)
    assert (tok.renders - base[0], tok.encodes - base[1]) == (1 + 2, 1 + 2)


def test_unhashable_messages_are_rendered_without_the_memo():
    tok = CountingTokenizer()
    codec = ChatCodec(tok)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi", "extra": ["not", "hashable"]}]
    before = tok.renders
    assert codec.prompt(messages) == fresh_prompt(codec, messages)
    assert codec.prompt(messages) == fresh_prompt(codec, messages)
    assert tok.renders - before == 4 and not codec._prompts
