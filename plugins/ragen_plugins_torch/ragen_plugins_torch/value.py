"""The critic: the policy's transformer body with a scalar value head."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["ValueModel"]


class ValueModel(nn.Module):
    """``forward(ids, attention_mask) -> [B, T]`` values, one per position (the state after that token)."""

    def __init__(self, body: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.body = body
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_pretrained(cls, path: str, dtype: Any = None) -> ValueModel:
        """The body of the causal LM at ``path`` (same ``from_pretrained`` code path) and a zero-initialised head."""
        from transformers import AutoModel

        body = AutoModel.from_pretrained(path, dtype=dtype)
        return cls(body, body.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden.float()).squeeze(-1)
