"""The ChatML chat template (Qwen's layout) and the special tokens of ragen's built-in tiny model.

A conversation renders as ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, and the generation prompt is
``<|im_start|>assistant\\n``. Assistant contents sit inside ``{% generation %}`` blocks, so Hugging Face's
``apply_chat_template(..., return_assistant_tokens_mask=True)`` can mark the assistant tokens; the rendered text is
unchanged by them (an assistant reply appears verbatim after the generation prompt, as
:class:`ragen_core.starpo.chat.ChatCodec` requires).
"""

from __future__ import annotations

__all__ = ["ADDED_TOKENS", "CHATML_TEMPLATE", "ENDOFTEXT", "GENERATION_PROMPT", "IM_END", "IM_START",
           "SPECIAL_TOKENS", "render_chatml"]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"

#: special tokens (skipped by ``decode(..., skip_special_tokens=True)``), in id order: 0, 1, 2
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
#: tags of the response format: single tokens, but ordinary text (kept when decoding with skip_special_tokens)
ADDED_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")

GENERATION_PROMPT = f"{IM_START}assistant\n"

CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def render_chatml(messages: list[dict[str, str]], *, add_generation_prompt: bool = False) -> str:
    """Render ``messages`` exactly as :data:`CHATML_TEMPLATE` does, without Jinja (used to build the corpus)."""
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (GENERATION_PROMPT if add_generation_prompt else "")
