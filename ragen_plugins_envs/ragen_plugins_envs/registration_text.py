"""Registration of the text-task envs: Bandit, Countdown, MetaMathQA and Sudoku, with their named variants.

Light on purpose: nothing is imported here; the registry loads each env class from its entry-point string on first
use. The plugin's ``ragen_register_envs`` hook calls :func:`register_text_envs`.

Envs (their defaults are RAGEN's base configurations) and variants:

- ``bandit`` (training profession pairs); ``bandit_test`` (the 8 held-out pairs);
- ``countdown`` (3 or 4 numbers); ``countdown_3``; ``countdown_4``;
- ``metamathqa`` (generated problems, mixed difficulty; ``data_path`` selects the real dataset);
  ``metamath_easy``; ``metamath_medium``; ``metamath_hard``;
- ``sudoku`` (4×4, easy); ``sudoku_4x4_medium``; ``sudoku_4x4_hard``; ``sudoku_9x9_easy``; ``sudoku_9x9_medium``;
  ``sudoku_9x9_hard``.
"""

from __future__ import annotations

from typing import Any

from ragen_core.registry import RolloutHints
from ragen_plugins_envs.registration_guides import GUIDES

__all__ = ["TEXT_ENVS", "TEXT_ENV_HINTS", "TEXT_ENV_VARIANTS", "register_text_envs"]

#: name -> (entry point, config class, description)
TEXT_ENVS: dict[str, tuple[str, str, str]] = {
    "bandit": (
        "ragen_plugins_envs.bandit:BanditEnv", "ragen_plugins_envs.bandit:BanditConfig",
        "two-armed bandit named after a low-risk and a high-risk profession (single turn)",
    ),
    "countdown": (
        "ragen_plugins_envs.countdown:CountdownEnv", "ragen_plugins_envs.countdown:CountdownConfig",
        "reach the target with + - * / using each of 3-4 numbers once (single turn, no eval)",
    ),
    "metamathqa": (
        "ragen_plugins_envs.metamath:MetaMathEnv", "ragen_plugins_envs.metamath:MetaMathConfig",
        "math word problems (MetaMathQA format or the built-in generated set), reward 1/2^attempt",
    ),
    "sudoku": (
        "ragen_plugins_envs.sudoku:SudokuEnv", "ragen_plugins_envs.sudoku:SudokuConfig",
        "4x4 or 9x9 Sudoku with a verified unique solution (default 4x4 easy)",
    ),
}

#: name -> (base env, params, description)
TEXT_ENV_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "bandit_test": ("bandit", {"split": "test"}, "bandit on the 8 held-out profession pairs"),
    "countdown_3": ("countdown", {"num_count": 3}, "countdown with 3 numbers"),
    "countdown_4": ("countdown", {"num_count": 4}, "countdown with 4 numbers"),
    "metamath_easy": ("metamathqa", {"difficulty": "easy"}, "generated math word problems, easy level"),
    "metamath_medium": ("metamathqa", {"difficulty": "medium"}, "generated math word problems, medium level"),
    "metamath_hard": ("metamathqa", {"difficulty": "hard"}, "generated math word problems, hard level"),
    "sudoku_4x4_medium": ("sudoku", {"size": 4, "difficulty": "medium"}, "4x4 Sudoku, 50% of the cells removed"),
    "sudoku_4x4_hard": ("sudoku", {"size": 4, "difficulty": "hard"}, "4x4 Sudoku, 60% of the cells removed"),
    "sudoku_9x9_easy": ("sudoku", {"size": 9, "difficulty": "easy"}, "9x9 Sudoku, 40% of the cells removed"),
    "sudoku_9x9_medium": ("sudoku", {"size": 9, "difficulty": "medium"}, "9x9 Sudoku, 50% of the cells removed"),
    "sudoku_9x9_hard": ("sudoku", {"size": 9, "difficulty": "hard"}, "9x9 Sudoku, 60% of the cells removed"),
}


#: env or variant name -> how its rollouts are shaped (a variant's over its env's). Bandit: one pull, one turn;
#: Countdown: one expression; MetaMathQA: one answer (RAGEN runs both single-turn); the answers are an arm name, an
#: expression, a number or fraction, the math reasoning longer than the others. Sudoku: 4x4 needs about 10
#: placements (5 turns of 2), 9x9 about 40 (10 turns of 4), each placement ~10 tokens.
TEXT_ENV_HINTS: dict[str, RolloutHints] = {
    "bandit": RolloutHints(max_turn=1, max_actions_per_turn=1, answer_tokens=16, think_tokens=32),
    "countdown": RolloutHints(max_turn=1, max_actions_per_turn=1, answer_tokens=32, think_tokens=32),
    "metamathqa": RolloutHints(max_turn=1, max_actions_per_turn=1, answer_tokens=32, think_tokens=64),
    "sudoku": RolloutHints(max_turn=5, max_actions_per_turn=2, answer_tokens=32, think_tokens=32),
    "sudoku_9x9_easy": RolloutHints(max_turn=10, max_actions_per_turn=4, answer_tokens=64, think_tokens=64),
    "sudoku_9x9_medium": RolloutHints(max_turn=10, max_actions_per_turn=4, answer_tokens=64, think_tokens=64),
    "sudoku_9x9_hard": RolloutHints(max_turn=10, max_actions_per_turn=4, answer_tokens=64, think_tokens=64),
}


def register_text_envs(registry: Any) -> None:
    """Register the four text-task envs and their variants on an env registry (``EnvRegistry``)."""
    for name, (entry_point, config, description) in TEXT_ENVS.items():
        registry.register(name, entry_point, config=config, description=description, hints=TEXT_ENV_HINTS[name],
                          guide=GUIDES.get(name, {}))
    for name, (env, params, description) in TEXT_ENV_VARIANTS.items():
        registry.register_variant(name, env=env, params=dict(params), description=description,
                                  hints=TEXT_ENV_HINTS.get(name))
