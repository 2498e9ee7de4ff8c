"""The rollout shape an env asks for, and how a config gets it (part of the StarPO layer, shared by every trainer).

An env states at registration (or as a ``rollout_hints`` class attribute) how its rollouts should be shaped:
:class:`RolloutHints`. :func:`apply_env_hints` fills the ``rollout`` keys a config does not set explicitly from the
hints of the envs it runs, and :func:`derived_run_name` names a run that sets no ``run.name`` after its model and
envs. Both are called by :func:`ragen_core.config.resolve_config`, so every command resolves a config the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["DEFAULT_THINK_TOKENS", "RolloutHints", "apply_env_hints", "derived_run_name"]

#: the reasoning allowance of an env whose hints give ``answer_tokens`` but no ``think_tokens``
DEFAULT_THINK_TOKENS = 32
_POSITIVE = attrs.validators.optional([attrs.validators.instance_of(int), attrs.validators.ge(1)])


@attrs.frozen(kw_only=True)
class RolloutHints:
    """How an env wants its rollouts shaped: what a config gets for the ``rollout`` keys it does not set itself
    (see :func:`ragen_core.config.apply_env_hints`). Every field is optional (None: no opinion, the config's value
    stays).

    The token budget is stated about the answer: ``rollout.max_new_tokens`` becomes ``answer_tokens``, plus
    ``think_tokens`` when the run thinks (``rollout.think``), so one env's hints fit a run with and without
    reasoning.

    :ivar max_turn: assistant turns one trajectory needs (``rollout.max_turn``), e.g. 1 for a single-turn task.
    :ivar max_actions_per_turn: actions one answer may hold (``rollout.max_actions_per_turn``).
    :ivar answer_tokens: tokens the env's longest expected answer takes: its actions, the separators between them
        and the closing ``</answer>``.
    :ivar think_tokens: tokens of reasoning (``<think>… </think> <answer>``) to allow before the answer when the run
        thinks (None: :data:`DEFAULT_THINK_TOKENS`, when ``answer_tokens`` is given).
    :ivar think: whether the env wants ``<think>`` reasoning before the answer (``rollout.think``).
    """

    max_turn: int | None = attrs.field(default=None, validator=_POSITIVE)
    max_actions_per_turn: int | None = attrs.field(default=None, validator=_POSITIVE)
    answer_tokens: int | None = attrs.field(default=None, validator=_POSITIVE)
    think_tokens: int | None = attrs.field(default=None, validator=_POSITIVE)
    think: bool | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bool)))

    def given(self) -> dict[str, Any]:
        """The fields that are set (not None), by name."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}

    def max_new_tokens(self, think: bool) -> int | None:
        """The per-turn token budget: ``answer_tokens``, plus the reasoning's when ``think``; None without
        ``answer_tokens``."""
        if self.answer_tokens is None:
            return None
        return self.answer_tokens + ((self.think_tokens or DEFAULT_THINK_TOKENS) if think else 0)

    @classmethod
    def fitting_all(cls, hints: list[RolloutHints]) -> RolloutHints:
        """One set of hints that fits every env of a mix: the most turns, actions per turn, answer tokens and
        reasoning tokens any of them asks for; ``think`` only when all that state it agree."""
        def most(key: str) -> int | None:
            return max((getattr(h, key) for h in hints if getattr(h, key) is not None), default=None)

        thinks = {h.think for h in hints} - {None}
        return cls(max_turn=most("max_turn"), max_actions_per_turn=most("max_actions_per_turn"),
                   answer_tokens=most("answer_tokens"), think=thinks.pop() if len(thinks) == 1 else None,
                   think_tokens=max((h.think_tokens or DEFAULT_THINK_TOKENS for h in hints if h.answer_tokens),
                                    default=None))


def _to_hints(value: Any) -> RolloutHints | None:
    return RolloutHints(**value) if isinstance(value, Mapping) else value


def apply_env_hints(config: Any, registries: Any, derived: dict[str, str] | None = None) -> Any:
    """``config`` with the rollout keys it does not set explicitly (:meth:`RagenConfig.is_explicit`) taken from the
    rollout hints of the envs it runs, training and validation (one set fitting all of them:
    :meth:`~ragen_core.registry.RolloutHints.fitting_all`): ``max_turn``, ``max_actions_per_turn``, ``think``, and
    ``max_new_tokens`` = the answer tokens plus, when the run thinks, the reasoning tokens. ``derived`` receives each
    key filled in, with the envs it came from. Returns a new config when anything changed."""
    names = list(dict.fromkeys(c.name for c in [*config.envs, *(config.val_envs or [])]))
    hints = RolloutHints.fitting_all([registries.envs.hints(name) for name in names])
    values = {key: getattr(hints, key) for key in ("max_turn", "max_actions_per_turn", "think")}
    hinted_think = values["think"] is not None and not config.is_explicit("rollout.think")
    values["max_new_tokens"] = hints.max_new_tokens(values["think"] if hinted_think else config.rollout.think)
    changes = {k: v for k, v in values.items() if v is not None and not config.is_explicit(f"rollout.{k}")}
    if derived is not None:
        derived.update({f"rollout.{key}": f"hints of {', '.join(names)}" for key in changes})
    return attrs.evolve(config, rollout=attrs.evolve(config.rollout, **changes)) if changes else config


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def derived_run_name(config: Any, trainer: Any = None) -> str:
    """The run name of a config that sets none: ``<model>-<env>`` (``tiny-bandit``), the envs joined by ``-`` when
    there are two or three, ``multi`` beyond; without a ``model`` option just the envs. Always one safe path
    component (letters, digits, ``_ . -``)."""
    model = getattr(trainer, "model", None) or config.trainer.options.get("model")
    names = list(dict.fromkeys(c.name for c in config.envs))
    parts = [str(model).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]] if model else []
    name = "-".join([*parts, "-".join(names) if len(names) <= 3 else "multi"])
    return _UNSAFE.sub("_", name).strip("._-")[:80].rstrip("._-") or "ragen"
