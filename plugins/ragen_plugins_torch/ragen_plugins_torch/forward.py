"""Training-time forward passes that project to the vocabulary only where a log-prob is needed.

A StarPO sequence is mostly context (system prompt, observations) and a little generated text: with the tiny model
a 3-turn Sokoban trajectory is ~470 tokens of which ~25 are sampled. The loss needs log-probs and entropies only at
the sampled tokens, so :func:`masked_logprobs` runs the decoder over the whole sequence but applies the output layer,
the log-softmax and the entropy only at those positions (a ~20x smaller ``[N, vocab]`` instead of ``[B, T, vocab]``).
The result equals the full computation at the selected positions (tested) and is 0 elsewhere.

The members of a GRPO group share their first prompt token for token (RAGEN's StarPO: one seed, several samples),
and that prompt is most of each sequence (Bandit with SmolLM2: 214 of ~220 tokens). :func:`grouped_logprobs` runs
such a shared prefix through the decoder once per group and the members' own tokens on top of its key/value cache,
batched; autograd sums the members' gradients through the shared prefix, so the log-probs, the entropies and the
gradients equal the per-sequence computation (tested to float32 round-off) at a fraction of the work (measured with
SmolLM2-135M in float32, a group of 8 with a 214-token prompt and 8 new tokens: forward and backward 15.3 s -> 2.8 s).

In a multi-turn batch (``limited_multi_turn`` context) most rows are turns with prompts of their own, but every one
starts with the same system prompt (the 3x3 lake with the tiny model: 144 of ~224 prompt tokens). So the sharing has
two levels: the batch's common prefix runs once, then each cluster and the remaining rows continue from its cache
(32 lake rows, forward and backward: 0.52 s -> 0.22 s with the tiny model on 2 cores).
"""

from __future__ import annotations

from typing import Any

import torch

from .losses import token_logprobs_entropy

__all__ = ["cache_layers", "common_prefix_length", "fork_cache", "full_logprobs", "grouped_logprobs", "masked_logprobs",
           "shared_prefixes", "supports_masked_head"]

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


#: the shortest shared prefix worth a separate pass (shorter ones are run with the rest of the sequence)
MIN_SHARED_PREFIX = 16


def shared_prefixes(input_ids: torch.Tensor, positions: torch.Tensor) -> list[tuple[list[int], int]]:
    """Rows of ``input_ids`` that share their context before the first scored token, as ``(rows, prefix length)``.

    A row's prefix is its tokens ``0..t-1`` where column ``t`` is its first in ``positions`` (bool ``[B, T-1]``,
    column ``t`` about token ``t + 1``): token ``t``, whose hidden state predicts the first scored token, stays with
    the row, so every row keeps a token of its own. Rows with equal prefixes form one cluster (in first-seen order); a row alone, without a
    scored token or with a prefix under :data:`MIN_SHARED_PREFIX` tokens is a cluster of one with length 0.
    """
    clusters: dict[Any, list[int]] = {}  # insertion order is first-seen order
    lengths: dict[Any, int] = {}
    ids = input_ids.tolist()
    for row, scored in enumerate(positions.bool().tolist()):
        length = next((t for t, s in enumerate(scored) if s), 0)  # tokens 0..length-1 precede the first scored one
        key: Any = tuple(ids[row][:length]) if length >= MIN_SHARED_PREFIX else ("row", row)
        clusters.setdefault(key, []).append(row)
        lengths[key] = length
    return [(rows, lengths[key] if len(rows) > 1 else 0) for key, rows in clusters.items()]


def common_prefix_length(input_ids: torch.Tensor, positions: torch.Tensor) -> int:
    """How many leading tokens every row of the batch shares before its first scored token (0 when under
    :data:`MIN_SHARED_PREFIX`, for a single row, or when a row has nothing scored).

    Like :func:`shared_prefixes`, the token whose hidden state predicts a row's first scored token stays with the row.
    In a multi-turn batch this is the system prompt and the chat template's opening, shared by every turn of every
    episode (the 3x3 lake: 144 of a 224-token prompt)."""
    if input_ids.shape[0] < 2:
        return 0
    scored = positions.bool()
    if not bool(scored.any(-1).all()):
        return 0
    first = int(scored.int().argmax(-1).min())  # the earliest first-scored column over the rows
    differs = (input_ids[:, :first] != input_ids[:1, :first]).any(0).nonzero()
    length = int(differs[0]) if differs.numel() else first
    return length if length >= MIN_SHARED_PREFIX else 0


def grouped_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
                     temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`masked_logprobs` for right-padded rows (``attention_mask`` 1 then 0), computed once per shared prefix,
    on two levels:

    1. the batch's common prefix (:func:`common_prefix_length`: in a multi-turn batch the system prompt) goes
       through the decoder once;
    2. on top of its key/value cache, each cluster of rows that shares a longer prefix (:func:`shared_prefixes`: a
       GRPO group's first prompt) runs the rest of that prefix once and its rows' own tokens as one batch; every
       other row's own tokens run as one more batch.

    Autograd sums the rows' gradients through the shared passes, so log-probs, entropies and gradients equal
    :func:`masked_logprobs` (tested to float32 round-off). Falls back to it when nothing is shared, the model has no
    separable output layer, or its cache is not a plain full-attention key/value cache."""
    positions = positions.bool()
    if not supports_masked_head(model):
        return masked_logprobs(model, input_ids, attention_mask, positions, temperature)
    root = common_prefix_length(input_ids, positions)
    clusters = [(rows, length) for rows, length in shared_prefixes(input_ids, positions)
                if len(rows) > 1 and length - root >= MIN_SHARED_PREFIX]
    if root == 0 and not clusters:
        return masked_logprobs(model, input_ids, attention_mask, positions, temperature)
    decoder = model.get_decoder()
    root_kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    if root:
        root_kv = cache_layers(decoder(input_ids=input_ids[:1, :root], use_cache=True).past_key_values)
        if root_kv is None:
            return masked_logprobs(model, input_ids, attention_mask, positions, temperature)
    clustered = {r for rows, _ in clusters for r in rows}
    rest = [r for r in range(input_ids.shape[0]) if r not in clustered]
    passes = [(rows, root, length) for rows, length in clusters] + ([(rest, root, root)] if rest else [])
    parts: list[_Part] = []
    try:
        for rows, start, length in passes:
            part = _rows_pass(model, input_ids, attention_mask, positions, rows, start, length, root_kv, temperature)
            if part is not None:
                parts.append(part)
    except _CacheNotExpandable:
        return masked_logprobs(model, input_ids, attention_mask, positions, temperature)
    return _scatter_parts(positions, parts)


class _CacheNotExpandable(Exception):
    """A cluster's cache cannot be expanded to its rows: :func:`grouped_logprobs` falls back to the plain pass."""


_Part = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _rows_pass(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
               rows: list[int], start: int, length: int, root_kv: list[tuple[torch.Tensor, torch.Tensor]] | None,
               temperature: float) -> _Part | None:
    """One pass of :func:`grouped_logprobs` over ``rows``, which continue the batch's common prefix (``start``
    tokens, cached in ``root_kv``) with a shared stretch up to ``length`` (run once) and then their own tokens (as one
    batch). Returns the log-probs and entropies at the rows' scored positions with their batch rows and columns, or
    None when none is scored; raises :class:`_CacheNotExpandable` for a cache it cannot expand to the rows."""
    decoder = model.get_decoder()
    sub = torch.as_tensor(rows, device=input_ids.device)
    ids, attn = input_ids[sub], attention_mask[sub]
    width = int(attn.sum(-1).max())  # drop the rows' common right padding
    ids, attn = ids[:, :width], attn[:, :width]
    cache = fork_cache(root_kv, 1 if length > start else len(rows), model) if root_kv is not None else None
    if length > start:  # the cluster's own shared tokens, once, on top of the batch's common prefix
        out = decoder(input_ids=ids[:1, start:length], past_key_values=cache, use_cache=True,
                      position_ids=torch.arange(start, length, device=ids.device)[None])
        cache = out.past_key_values
        if not hasattr(cache, "batch_repeat_interleave"):  # a cache that cannot be expanded to the rows
            raise _CacheNotExpandable
        cache.batch_repeat_interleave(len(rows))
    hidden = decoder(input_ids=ids[:, length:], attention_mask=attn, past_key_values=cache, use_cache=False,
                     position_ids=torch.arange(length, width, device=ids.device).expand(len(rows), -1)
                     ).last_hidden_state  # hidden[:, j] is token length + j
    index = positions[sub, length:width - 1].nonzero(as_tuple=True)  # column length + j is about token length+j+1
    if index[0].numel() == 0:
        return None
    logits = model.get_output_embeddings()(hidden[index])
    targets = ids[:, length + 1:][index]
    lp, en = token_logprobs_entropy(logits.unsqueeze(0), targets.unsqueeze(0), temperature)
    return lp[0], en[0], sub[index[0]], index[1] + length


def _scatter_parts(positions: torch.Tensor, parts: list[_Part]) -> tuple[torch.Tensor, torch.Tensor]:
    """The passes' log-probs and entropies put at their rows and columns of ``[B, T-1]`` tensors, 0 elsewhere."""
    logp = torch.zeros(positions.shape, dtype=torch.float32, device=positions.device)
    ent = torch.zeros_like(logp)
    if not parts:
        return logp, ent
    index = (torch.cat([p[2] for p in parts]), torch.cat([p[3] for p in parts]))
    return (logp.to(parts[0][0].dtype).index_put(index, torch.cat([p[0] for p in parts])),
            ent.to(parts[0][1].dtype).index_put(index, torch.cat([p[1] for p in parts])))


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """The per-layer (keys, values) of a plain full-attention cache, or None for any other kind (sliding windows,
    recurrent state, an unknown cache class), which :func:`grouped_logprobs` then does not fork."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # pragma: no cover - an older transformers
        return None
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def fork_cache(kv: list[tuple[torch.Tensor, torch.Tensor]], rows: int, model: Any) -> Any:
    """A new cache holding ``kv`` (batch 1) expanded to ``rows``: its updates make new tensors and never touch
    ``kv``, so several passes can each continue the same prefix; gradients flow back to ``kv`` through the expand."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in kv],
                        config=model.config)
