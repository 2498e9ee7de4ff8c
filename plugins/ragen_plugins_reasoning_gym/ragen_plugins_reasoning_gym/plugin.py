"""The plugin module named by the entry point (group ``ragen``, name ``reasoning_gym``): registration only.

Nothing is imported here beyond the hook marker: reasoning-gym (a few seconds to import) loads when an env is made,
its options are validated, or ``ragen envs --members rg`` lists the datasets.
"""

from __future__ import annotations

from typing import Any

from ragen_core import hookimpl

#: the catalogue entry of ``ragen envs --long``
GUIDE = {
    "rules": "One problem of a reasoning-gym dataset per episode, chosen by `dataset` (or the name "
             "`rg.<dataset>`): arithmetic, algebra, logic, graphs, games, cognition, ARC and more; the dataset's "
             "own options go in `config`. The observation is the problem's question; a scored answer ends the episode. "
             "reset(seed) poses problem seed % `size` of the dataset made with `seed`.",
    "actions": "the final answer as free text, in the format the question asks for. An empty answer, one longer "
               "than `max_answer_length`, one the dataset's scorer would execute as code (a few scorers eval their "
               "input: such text is refused unscored) and one whose scoring raises are invalid: reward 0, nothing "
               "changes.",
    "rewards": "the dataset's own score_answer(answer, entry), usually 0 to 1 (some datasets give partial credit, "
               "e.g. 0.01 for a well-formed wrong answer); 0 for an invalid answer.",
    "success": "the score reached `success_threshold` (default 1).",
}

#: one answer per episode; most answers are a word, a number or a short list, the longest a grid or a move list
HINTS = {"max_turn": 1, "max_actions_per_turn": 1, "answer_tokens": 96, "think_tokens": 256}


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    """Register the ``reasoning_gym`` env and the ``rg`` namespace (``rg.<dataset>``)."""
    registry.register("reasoning_gym", "ragen_plugins_reasoning_gym.env:ReasoningGymEnv",
                      config="ragen_plugins_reasoning_gym.env:ReasoningGymConfig",
                      description="any reasoning-gym dataset as a single-turn task scored by the dataset "
                                  "(option dataset; default leg_counting)",
                      hints=HINTS, guide=GUIDE)
    registry.register_namespace("rg", env="reasoning_gym", option="dataset",
                                names="ragen_plugins_reasoning_gym.catalogue:dataset_names",
                                description="reasoning-gym datasets: rg.leg_counting, rg.gcd, rg.sudoku, ... "
                                            "(ragen envs --members rg)")
