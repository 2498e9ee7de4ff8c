"""Training-time forward passes that project to the vocabulary only where a log-prob is needed.

A StarPO sequence is mostly context (system prompt, observations) and a little generated text: with the tiny model
a 3-turn Sokoban trajectory is ~470 tokens of which ~25 are sampled. The loss needs log-probs and entropies only at
the sampled tokens, so :func:`masked_logprobs` runs the decoder over the whole sequence but applies the output layer,
the log-softmax and the entropy only at those positions (a ~20x smaller ``[N, vocab]`` instead of ``[B, T, vocab]``).
The result equals the full computation at the selected positions (tested) and is 0 elsewhere.
"""

from __future__ import annotations

from typing import Any

import torch

from .losses import token_logprobs_entropy

__all__ = ["full_logprobs", "masked_logprobs", "supports_masked_head"]

#: config attributes that change logits after the output layer; a model that has one is scored the plain way
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "output_multiplier_scale", "logits_scaling")


def supports_masked_head(model: Any) -> bool:
    """Whether ``model`` splits into a decoder (``get_decoder()``) and an output layer (``get_output_embeddings()``)
    with nothing in between that :func:`masked_logprobs` would skip."""
    config = getattr(model, "config", None)
    if config is None or any(getattr(config, k, None) not in (None, 1, 1.0) for k in _LOGIT_TRANSFORMS):
        return False
    try:
        decoder, head = model.get_decoder(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return False
    return decoder is not None and decoder is not model and isinstance(head, torch.nn.Module)


def full_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropies of ``input_ids[:, 1:]`` (``[B, T-1]``) from the full logits."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    return token_logprobs_entropy(logits, input_ids[:, 1:], temperature)


def masked_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
                    temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropies of ``input_ids[:, 1:]`` (``[B, T-1]``) at ``positions`` (bool ``[B, T-1]``: column
    ``t`` is about token ``t + 1``), 0 elsewhere. Differentiable; falls back to :func:`full_logprobs` (then masked)
    for a model without a separable output layer."""
    positions = positions.bool()
    if not supports_masked_head(model):
        logp, ent = full_logprobs(model, input_ids, attention_mask, temperature)
        return logp * positions, ent * positions
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    index = positions.nonzero(as_tuple=True)
    logits = model.get_output_embeddings()(hidden[:, :-1][index])  # [N, vocab]
    logp, ent = token_logprobs_entropy(logits.unsqueeze(0), input_ids[:, 1:][index].unsqueeze(0), temperature)
    zeros = torch.zeros(positions.shape, dtype=logp.dtype, device=logp.device)
    return zeros.index_put(index, logp[0]), zeros.index_put(index, ent[0])
