"""One sampling step of a Llama-family model over key/value buffers preallocated for the whole call.

transformers' forward, called once per sampled token, does per step what a sampler does not need: it grows the cache
by concatenation (every step copies every layer's keys and values), copies the keys and values again for grouped-query
attention whenever there is a padding mask (``repeat_kv``), and rebuilds the attention mask from the 2-D mask through
its mask machinery. With a small model on a CPU those are most of a step (the tiny model, 64 rows of ~130 cached
tokens, one thread: 12 ms a step through ``model(...)``, 7.5 ms here). :class:`DecodeStep` runs the same modules in
the same order (the model's own norms, projections, rotary embedding, ``apply_rotary_pos_emb``, MLPs and output
layer, and ``scaled_dot_product_attention`` with the same mask and scale), writing each step's keys and values in
place into buffers sized for the call, and attending through views of them.

Same modules, same ops, same shapes: the logits are the model's own **bit for bit** (tested with hypothesis against
``model(...)`` over padded and unpadded batches, and checked again at run time: the first step of every model object
also runs through ``model(...)`` and the step is used only if the two logits are equal; otherwise the sampler keeps
``model(...)`` for that model and says so once). Used for the model types whose decoder layers have this structure
(:data:`FAMILY`) with SDPA attention and no sliding window; any other model samples through its own forward.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["FAMILY", "DecodeStep", "step_support"]

#: model types whose decoder layer is: norm, attention (q/k/v/o projections, rotary embedding, SDPA), residual,
#: norm, MLP, residual, with no extra norm on the queries or keys
FAMILY = frozenset({"llama", "qwen2"})
_ATTENTION_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "scaling", "num_key_value_groups")
_LAYER_PARTS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
#: model object -> whether its first step was bit-identical to its own forward (models are compared by identity)
_VERIFIED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _base(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (whose LoRA layers replace the projections in place)."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def step_support(model: Any) -> str | None:
    """Why :class:`DecodeStep` cannot run ``model`` (None: it can)."""
    from .forward import _LOGIT_TRANSFORMS

    base = _base(model)
    config = getattr(base, "config", None)
    if config is None or getattr(config, "model_type", None) not in FAMILY:
        return f"model type {getattr(config, 'model_type', None)!r} is not one of {sorted(FAMILY)}"
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return f"attention {getattr(config, '_attn_implementation', None)!r} is not 'sdpa'"
    if any(t != "full_attention" for t in getattr(config, "layer_types", None) or ()):
        return "the model has sliding-window layers"
    if any(getattr(config, k, None) not in (None, 1, 1.0) for k in _LOGIT_TRANSFORMS):
        return "the model transforms its logits after the output layer"
    inner: Any = getattr(base, "model", None)
    if not all(hasattr(inner, a) for a in ("embed_tokens", "layers", "rotary_emb", "norm")) \
            or not hasattr(base, "lm_head"):
        return "the model does not have the Llama-family module layout"
    for layer in inner.layers:
        attn = getattr(layer, "self_attn", None)
        if not all(hasattr(layer, a) for a in _LAYER_PARTS) or not all(hasattr(attn, a) for a in _ATTENTION_PARTS) \
                or hasattr(attn, "q_norm") or getattr(attn, "sliding_window", None):
            return "a decoder layer does not have the Llama-family layout"
    return None


def verified(model: Any) -> bool | None:
    """Whether ``model``'s first step was bit-identical to its own forward (None: not checked yet)."""
    return _VERIFIED.get(_base(model))


def record(model: Any, same: bool) -> None:
    """Remember the run-time check's outcome for ``model``; a failed one is logged once."""
    _VERIFIED[_base(model)] = same
    if not same:
        from ragen_core.log import get_logger

        get_logger("ragen.decode").warning(
            "decode_step_mismatch", model=type(_base(model)).__name__,
            detail="the in-place decode step's logits differ from the model's forward; sampling through the forward")


class DecodeStep:
    """The sampling steps of one ``generate`` call: ``step(ids, positions)`` feeds one token per row (``[B, 1]``) and
    returns the model's logits for the next (``[B, 1, V]``), as ``model(input_ids=ids, attention_mask=mask,
    position_ids=positions, past_key_values=cache, logits_to_keep=1).logits`` would with the mask and the cache
    grown by that token.

    :param model: a model :func:`step_support` accepts.
    :param layers: the cache so far, per layer ``(keys, values)`` ``[B, kv_heads, width, head_dim]``.
    :param mask: ``[B, width]``, 0 at padding.
    :param capacity: the most columns the call will reach (``width`` + the steps left).
    :param rows: the cache row of each of the ``B`` rows (``[B]``, into ``layers``' rows: requests that share a
        prompt share its cache row), gathered straight into the buffers; None: row ``i`` is ``layers``' row ``i``.
    """

    def __init__(self, model: Any, layers: list[tuple[torch.Tensor, torch.Tensor]], mask: torch.Tensor,
                 capacity: int, rows: torch.Tensor | None = None) -> None:
        self.model = base = _base(model)
        batch, width = mask.shape
        self.keys = [k.new_empty((batch, k.shape[1], capacity, k.shape[3])) for k, _v in layers]
        self.values = [v.new_empty((batch, v.shape[1], capacity, v.shape[3])) for _k, v in layers]
        for (k, v), kb, vb in zip(layers, self.keys, self.values):
            if rows is None:
                kb[:, :, :width] = k
                vb[:, :, :width] = v
            else:
                torch.index_select(k, 0, rows, out=kb[:, :, :width])
                torch.index_select(v, 0, rows, out=vb[:, :, :width])
        self._mask = mask.new_zeros((batch, capacity))
        self._mask[:, :width] = mask
        self._allowed = self._mask.bool()
        self.padded = not bool(mask.all())  # new columns are never padding: no padding now, none later
        self.width = width
        self.rotate = sys.modules[type(base.model.layers[0].self_attn).__module__].apply_rotary_pos_emb
        # transformers' SDPA path copies keys and values per query head under a mask on CUDA (``repeat_kv``); on a
        # CPU ``enable_gqa`` gives the same values without the copy (tested)
        self.copy_kv = self.padded and self._mask.device.type != "cpu"

    @property
    def mask(self) -> torch.Tensor:
        """The attention mask of every column so far (``[B, width]``)."""
        return self._mask[:, :self.width]

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's keys and values so far (views of the buffers, ``[B, kv_heads, width, head_dim]``)."""
        return [(k[:, :, :self.width], v[:, :, :self.width]) for k, v in zip(self.keys, self.values)]

    def cache(self) -> Any:
        """The cache so far as transformers' ``DynamicCache`` (over views of the buffers)."""
        from transformers import DynamicCache

        return DynamicCache(ddp_cache_data=self.layers(), config=self.model.config)

    def step(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        inner, n = self.model.model, self.width
        self._mask[:, n] = 1
        self._allowed[:, n] = True
        allowed = self._allowed[:, None, None, :n + 1] if self.padded else None
        hidden = inner.embed_tokens(ids)
        rope = inner.rotary_emb(hidden, positions)
        for layer, kb, vb in zip(inner.layers, self.keys, self.values):
            hidden = hidden + self._attend(layer.self_attn, layer.input_layernorm(hidden), rope, kb, vb, n, allowed)
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        self.width = n + 1
        return self.model.lm_head(inner.norm(hidden)[:, -1:, :])

    def _attend(self, attn: Any, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], kb: torch.Tensor,
                vb: torch.Tensor, n: int, allowed: torch.Tensor | None) -> torch.Tensor:
        shape = (x.shape[0], 1, -1, attn.head_dim)
        q = attn.q_proj(x).view(shape).transpose(1, 2)
        k = attn.k_proj(x).view(shape).transpose(1, 2)
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        q, k = self.rotate(q, k, *rope)
        kb[:, :, n:n + 1] = k
        vb[:, :, n:n + 1] = v
        keys, values = kb[:, :, :n + 1], vb[:, :, :n + 1]
        if self.copy_kv:
            from transformers.integrations.sdpa_attention import repeat_kv

            out = F.scaled_dot_product_attention(q, repeat_kv(keys, attn.num_key_value_groups),
                                                 repeat_kv(values, attn.num_key_value_groups), attn_mask=allowed,
                                                 dropout_p=0.0, scale=attn.scaling, is_causal=False)
        else:
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, dropout_p=0.0,
                                                 scale=attn.scaling, is_causal=False, enable_gqa=True)
        return attn.o_proj(out.transpose(1, 2).contiguous().reshape(x.shape[0], 1, -1).contiguous())
