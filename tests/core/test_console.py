"""One console: on a terminal, log lines print above progress displays, never inside them; JSON logs get none."""

from __future__ import annotations

import io
import json
import re
import time

import pytest

from ragen_core.log import configure_logging, get_logger, live_display, stage
from ragen_core.runner import config_summary

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen_pieces(raw: str) -> list[str]:
    """What a terminal shows as separate line starts: split at newlines and carriage returns, colours removed."""
    return [p for p in re.split(r"[\r\n]", ANSI.sub("", raw)) if p.strip()]


def mixed(raw: str) -> list[str]:
    """Pieces where a log line does not start the line (it was printed after a progress bar's text)."""
    return [p for p in screen_pieces(raw) if STAMP.search(p) and not STAMP.match(p)]


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    yield
    configure_logging("json", "warning")


def test_logs_during_a_stage_print_on_their_own_lines() -> None:
    out = FakeTerminal()
    configure_logging("console", "info", stream=out)
    assert live_display()
    log = get_logger("t")
    with stage("warm-start", total=4, unit="steps") as advance:
        for i in range(4):
            log.info("warm_start", step=i)
            advance(1)
            time.sleep(0.05)
    raw = out.getvalue()
    assert "warm-start" in ANSI.sub("", raw) and "4/4" in ANSI.sub("", raw)  # the stage was drawn, with its total
    assert sum("warm_start" in p for p in screen_pieces(raw)) >= 4
    assert mixed(raw) == []


def test_json_logs_draw_no_progress() -> None:
    out = FakeTerminal()
    configure_logging("json", "info", stream=out)
    assert not live_display()
    with stage("loading", total=2) as advance:
        get_logger("t").info("loaded", part=1)
        advance(2)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["loaded"]


def test_a_pipe_gets_no_progress_even_with_console_lines() -> None:
    out = io.StringIO()
    configure_logging("console", "info", stream=out)
    assert not live_display()
    with stage("loading", total=2) as advance:
        get_logger("t").info("loaded")
        advance(2)
    assert "━" not in out.getvalue() and "loaded" in out.getvalue() and "\x1b[" not in out.getvalue()


def test_config_summary_is_one_line() -> None:
    data = {"trainer": {"name": "torch", "model": "tiny", "steps": 80}, "envs": [{"name": "frozenlake", "groups": 8}],
            "rollout": {"env_groups": 8, "group_size": 8, "max_turn": 3}, "filter": {"name": "top_p"},
            "estimator": {"name": "gigpo"}}
    assert config_summary(data) == ("trainer torch (tiny, 80 steps) · envs frozenlake×8 · rollout 8×8, 3 turns · "
                                    "filter top_p · estimator gigpo")
    assert config_summary(data, trainer=False).startswith("envs frozenlake×8")


def test_logs_without_a_stream_follow_standard_error_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Configured while one ``sys.stderr`` was current (a test runner's capture, closed since), later lines go to the
    ``sys.stderr`` of the moment instead of failing on the closed file."""
    import io
    import json
    import sys

    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("json", "info")
    first.close()
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    get_logger("t").warning("still_logged", n=1)
    assert json.loads(now.getvalue())["event"] == "still_logged"
