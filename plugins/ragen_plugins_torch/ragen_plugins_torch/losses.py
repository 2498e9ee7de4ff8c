"""PPO / GRPO loss pieces (torch): token log-probs and entropy, clipped policy loss with decoupled range and dual
clip, KL estimators, value loss with clipping, and RAGEN's loss aggregation modes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["aggregate", "kl_penalty", "policy_loss", "token_logprobs_entropy", "value_loss"]


def token_logprobs_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each target token and the entropy of each position's distribution (``[B, T]`` each).

    ``logits[:, t]`` predicts ``targets[:, t]`` (the caller shifts).
    """
    logits = logits.float() / max(temperature, 1e-6)
    logp = F.log_softmax(logits, dim=-1)
    chosen = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return chosen, entropy


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean",
              row_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Reduce ``[B, T]`` values over the mask: ``token-mean`` (all tokens equal), ``seq-mean-token-mean`` (mean per
    sequence, then over sequences), ``seq-mean-token-sum`` (sum per sequence, mean over sequences).

    ``row_weight`` (``[B]``, sequence modes only) makes the mean over sequences a weighted one, e.g. ``1 / turns``
    so that the turns of one episode, each its own row, weigh as much together as a one-row episode.
    """
    mask = mask.to(values.dtype)
    if mode == "token-mean":
        return (values * mask).sum() / mask.sum().clamp(min=1.0)
    per_seq = (values * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / mask.sum(-1).clamp(min=1.0)
    elif mode != "seq-mean-token-sum":
        raise ValueError(f"unknown loss aggregation {mode!r}")
    has = (mask.sum(-1) > 0).to(values.dtype)
    if row_weight is not None:
        has = has * row_weight.to(values.dtype)
    return (per_seq * has).sum() / has.sum().clamp(min=1e-12 if row_weight is not None else 1.0)


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
                clip_low: float = 0.2, clip_high: float = 0.28, dual_clip: float | None = 3.0,
                agg: str = "token-mean", row_weight: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate with decoupled clip range ``[1 − clip_low, 1 + clip_high]`` and dual clip ``c``
    (for negative advantages the loss is capped at ``−c·A``), aggregated by :func:`aggregate`. Returns the loss and
    metrics (clip fraction, approx KL between old and new policy)."""
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)
    ratio = log_ratio.exp()
    loss1 = -advantages * ratio
    loss2 = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(loss1, loss2)
    if dual_clip is not None:
        loss3 = -advantages * dual_clip
        clipped = torch.where(advantages < 0, torch.minimum(clipped, loss3), clipped)
    loss = aggregate(clipped, mask, agg, row_weight)
    m = mask.to(logp.dtype)
    with torch.no_grad():
        clipfrac = ((loss2 > loss1).to(logp.dtype) * m).sum() / m.sum().clamp(min=1.0)
        ppo_kl = ((-log_ratio) * m).sum() / m.sum().clamp(min=1.0)
    return loss, {"actor/pg_clipfrac": float(clipfrac), "actor/ppo_kl": float(ppo_kl)}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl") -> torch.Tensor:
    """Per-token KL estimate between the policy and the reference: ``k1`` (log-ratio), ``k2`` (½ log-ratio²),
    ``low_var_kl``/``k3`` ((r − 1) − log r with r = ref/policy, clamped to [−10, 10])."""
    diff = logp - ref_logp
    if kind == "k1":
        return diff
    if kind == "k2":
        return 0.5 * diff.square()
    if kind in ("k3", "low_var_kl"):
        log_r = (ref_logp - logp).clamp(-20.0, 20.0)
        return (log_r.exp() - 1.0 - log_r).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL estimator {kind!r}")


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *,
               clip: float | None = 0.5, agg: str = "token-mean", row_weight: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped value loss ½·max((V − R)², (clip(V, V_old ± c) − R)²), aggregated over the mask."""
    loss = (values - returns).square()
    if clip is not None:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns).square())
    out = 0.5 * aggregate(loss, mask, agg, row_weight)
    m = mask.to(values.dtype)
    return out, {"critic/values_mean": float((values.detach() * m).sum() / m.sum().clamp(min=1.0))}
