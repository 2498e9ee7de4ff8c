"""The eval progress bar's note says what its numbers are: each env's success rate over the groups finished so far,
the same number ``eval/ENV/success`` reports for those groups (not one batch's rate labelled with one env's name)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_plugins_eval.engine import eval_metrics, progress_note, success_tally


def record(env: str, seed: int, success: bool, env_error: str | None = None) -> dict[str, Any]:
    return {"env": env, "seed": seed, "success": success, "env_error": env_error}


def test_two_envs_each_get_their_own_rate() -> None:
    batch = [record("sokoban", 0, True), record("sokoban", 0, False), record("sokoban", 0, False),
             record("sokoban", 0, False), record("frozenlake", 0, True), record("frozenlake", 0, False)]
    assert progress_note(success_tally(batch)) == "(success so far: frozenlake 0.50 · sokoban 0.25)"


def test_the_rates_accumulate_over_batches_and_leave_env_errors_out() -> None:
    tally = success_tally([record("sokoban", 0, True), record("sokoban", 0, False)])
    assert progress_note(tally) == "(success so far: sokoban 0.50)"
    success_tally([record("sokoban", 1, False), record("sokoban", 1, False, env_error="boom"),
                   record("bandit", 0, True, env_error="boom")], tally)
    assert tally == {"sokoban": (1, 3)}
    assert progress_note(tally) == "(success so far: sokoban 0.33)"  # bandit: only env errors, no rate yet


def test_nothing_finished_shows_no_rate() -> None:
    assert progress_note({}) == ""
    assert progress_note(success_tally([record("sokoban", 0, True, env_error="boom")])) == ""


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["sokoban", "frozenlake", "bandit"]), st.integers(0, 3),
                                   st.booleans(), st.booleans()), max_size=8), max_size=5))
def test_the_note_is_what_eval_metrics_reports_for_the_finished_groups(
        batches: list[list[tuple[str, int, bool, bool]]]) -> None:
    tally: dict[str, tuple[int, int]] = {}
    seen: list[dict[str, Any]] = []
    for batch in batches:
        records = [record(env, seed, ok, "boom" if err else None) for env, seed, ok, err in batch]
        seen += records
        note = progress_note(success_tally(records, tally))
        expected = {env: m["success"] for env, m in eval_metrics(
            [{**r, "score": 0.0, "reward": 0.0, "turns": 1, "response_tokens": 1} for r in seen], 1).items()
            if env != "all" and "success" in m}
        assert note == (f"(success so far: {' · '.join(f'{e} {v:.2f}' for e, v in sorted(expected.items()))})"
                        if expected else "")
