"""The ``reasoning_gym`` env: one reasoning-gym problem per episode, answered in one turn.

The observation is the problem's question; the action is the answer text (free-form, ``action_names`` None). The
reward is the dataset's own ``score_answer(answer, entry)``, never a comparison with the reference string: several
datasets accept many answers (``graph_color``, ``rubiks_cube``, ``rush_hour``, ...) and some grade partly right
answers between 0 and 1. ``success`` is ``score >= success_threshold`` (default 1). A scored answer ends the
episode.

Invalid answers (reward 0, ``action_is_valid`` False, the state unchanged, the episode not ended: the trajectory's
one action ends it): an empty or whitespace-only answer, one longer than ``max_answer_length``, one the answer
screen refuses (:mod:`ragen_plugins_reasoning_gym.screen`: text that the dataset's scorer would execute as code),
and one whose scoring raised (``info["error"]`` says what it raised). ``info`` also carries ``answer_refused`` and
``score_error`` (0 or 1), which become metrics.

``reset(seed)`` poses problem ``seed % size`` of the dataset made with ``seed`` (the option) and ``config``, so one
seed always gives the same problem (reasoning-gym's ``codeio``, ``isomorphic_strings``, ``knight_swap``,
``polynomial_multiplication``, ``ransom_note`` and ``word_ladder`` also depend on Python's hash seed, so their
problems can differ between processes unless ``PYTHONHASHSEED`` is set). ``oracle_action()`` is the entry's
reference answer, or for the datasets without one the example solution reasoning-gym stores in the metadata
(``graph_color``, ``propositional_logic``, ``rubiks_cube``); ``boxnet`` and ``rush_hour`` have none.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import integer, number
from ragen_plugins_reasoning_gym import catalogue
from ragen_plugins_reasoning_gym.screen import refusal

__all__ = ["EXAMPLE_KEYS", "ReasoningGymConfig", "ReasoningGymEnv", "reference_answer"]

#: metadata keys holding an example solution, for the datasets whose entries have no ``answer``
EXAMPLE_KEYS = ("possible_answer", "example_answer", "example_correct_answer")


@attrs.define
class ReasoningGymConfig:
    """Options of :class:`ReasoningGymEnv`.

    :ivar dataset: the reasoning-gym dataset (``reasoning_gym.factory.DATASETS``; ``ragen envs --members rg``).
    :ivar config: the dataset's own options, given to its config class (``composite``: ``datasets``, a list of
        ``{name, weight, config}``); ``seed`` and ``size`` are this env's own options, not keys here.
    :ivar size: how many distinct problems: ``reset(seed)`` poses problem ``seed % size``.
    :ivar seed: the dataset's seed (reasoning-gym generates problem ``i`` from ``seed + i``).
    :ivar success_threshold: the score at which an answer counts as a success.
    :ivar max_answer_length: longer answers are invalid and are not scored.
    """

    dataset: str = "leg_counting"
    config: dict[str, Any] = attrs.field(factory=dict)
    size: int = attrs.field(default=500, validator=integer(1, 10**9))
    seed: int = attrs.field(default=42, validator=integer(0, 2**32 - 1))
    success_threshold: float = attrs.field(default=1.0, validator=number(0, 1, low_open=True))
    max_answer_length: int = attrs.field(default=10_000, validator=integer(1))

    def __attrs_post_init__(self) -> None:
        catalogue.dataset_config(self.dataset, self.config, seed=self.seed, size=self.size)


def reference_answer(entry: dict[str, Any]) -> str | None:
    """The entry's reference answer, else an example solution from its metadata (:data:`EXAMPLE_KEYS`; a mapping
    is written as JSON with string keys), else None."""
    answer = entry.get("answer")
    if isinstance(answer, str):
        return answer
    metadata = entry.get("metadata") or {}
    for key in EXAMPLE_KEYS:
        value = metadata.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return json.dumps({str(k): v for k, v in value.items()})
    return None


class ReasoningGymEnv(TextEnv):
    """A reasoning-gym dataset as a single-turn ragen env (see the module docstring)."""

    config_cls: ClassVar[type] = ReasoningGymConfig
    config: ReasoningGymConfig

    def __init__(self, config: ReasoningGymConfig | None = None, render_mode: str | None = "ansi",
                 **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        self.problems = catalogue.problems(cfg.dataset, cfg.config, seed=cfg.seed, size=cfg.size)
        self.instruction = (
            f"Solve this reasoning problem (reasoning-gym's {cfg.dataset!r}). Think it through, then answer with "
            "the final answer only, written exactly in the format the problem asks for (no explanation, no units "
            "or labels unless asked).")
        self.action_names = None
        self.legend = {}
        self.max_actions_per_traj = 1
        self.entry: dict[str, Any] | None = None
        self.index: int | None = None
        self._answer: str | None = None
        self._score = 0.0
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Pose problem ``seed % size`` (a random one without a seed)."""
        super().reset(seed=seed)
        size = self.config.size
        self.index = seed % size if seed is not None else int(self.np_random.integers(size))
        self.entry = self.problems.entry(self.index)
        self._answer, self._score, self._done = None, 0.0, False
        return self.render(), {"dataset": self._source(), "problem_index": self.index}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Score one answer with the dataset's ``score_answer``; see the module docstring for invalid answers."""
        if self._done or self.entry is None:
            return self.render(), 0.0, True, False, self._info(valid=False, error="the episode is over")
        problem = self._problem_with(action)
        if problem is not None:
            error, refused = problem
            return self.render(), 0.0, False, False, self._info(valid=False, error=error, refused=refused)
        try:
            score = float(self.problems.score(action, self.entry))
            if not math.isfinite(score):
                raise ValueError(f"score_answer returned {score}")
        except Exception as exc:  # noqa: BLE001 - a scorer's failure is the answer's, never the run's
            error = f"scoring raised {type(exc).__name__}: {exc}"[:500]
            return self.render(), 0.0, False, False, self._info(valid=False, error=error, score_error=True)
        self._answer, self._score, self._done = action, score, True
        info = self._info(valid=True, success=score >= self.config.success_threshold)
        return self.render(), score, True, False, info

    def render(self) -> str:
        """The question; after a scored answer, the answer and its score too."""
        if self.entry is None:
            return "No episode yet: call reset()."
        question = str(self.entry["question"])
        if self._answer is None:
            return question
        return f"{question}\n\nYour answer: {self._answer}\nScore: {self._score:g}"

    def oracle_action(self) -> str | None:
        """The reference answer (or example solution) of the current problem; None when it has none or the
        episode is over."""
        if self._done or self.entry is None:
            return None
        return reference_answer(self.entry)

    def _source(self) -> str:
        """The dataset that made (and scores) the current entry: a composite's member, else the env's dataset."""
        metadata = (self.entry or {}).get("metadata") or {}
        source = metadata.get("source_dataset")
        return source if isinstance(source, str) else self.config.dataset

    def _problem_with(self, action: Any) -> tuple[str, bool] | None:
        """Why ``action`` cannot be scored and whether it was refused (too long, or screened out rather than
        blank), or None when it can be."""
        if not isinstance(action, str):
            return f"the answer is not text ({type(action).__name__})", False
        if not action.strip():
            return "empty answer", False
        if len(action) > self.config.max_answer_length:
            return f"the answer is longer than max_answer_length ({self.config.max_answer_length} characters)", True
        why = refusal(self._source(), action)
        return (why, True) if why else None

    def _info(self, *, valid: bool, success: bool = False, error: str | None = None, refused: bool = False,
              score_error: bool = False) -> dict[str, Any]:
        info: dict[str, Any] = {"success": bool(success), "action_is_valid": valid, "action_is_effective": valid,
                                "answer_refused": float(refused), "score_error": float(score_error)}
        if error is not None:
            info["error"] = error
        return info
