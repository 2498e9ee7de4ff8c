"""A plugin module for ``RAGEN_PLUGINS=tests.step_recorder``: appends every step hook call as ``[hook, step]`` to
the JSON-lines file named by ``RAGEN_TEST_STEP_RECORD``, and registers ``exploding``, an env whose reset raises (so
each of its trajectories is an env error, whatever the policy writes)."""

from __future__ import annotations

import json
import os
from typing import Any

from ragen_core import hookimpl
from tests.core.toy import CounterEnv


class ResetExplodes(CounterEnv):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        raise RuntimeError("env exploded at reset")


def _record(hook: str, step: Any) -> None:
    with open(os.environ["RAGEN_TEST_STEP_RECORD"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps([hook, step]) + "\n")


@hookimpl
def ragen_register_envs(registry: Any) -> None:
    registry.register("exploding", "tests.step_recorder:ResetExplodes", description="raises at reset")


@hookimpl
def ragen_on_error(ctx: Any, error: BaseException) -> None:
    _record("ragen_on_error", getattr(ctx, "step", None))


@hookimpl
def ragen_on_rollout_end(ctx: Any) -> None:
    _record("ragen_on_rollout_end", ctx.step)


@hookimpl
def ragen_collect_metrics(ctx: Any) -> dict[str, float]:
    _record("ragen_collect_metrics", ctx.step)
    return {}


@hookimpl
def ragen_on_step_end(ctx: Any) -> None:
    _record("ragen_on_step_end", ctx.step)


@hookimpl
def ragen_on_metrics(run: Any, step: int, metrics: dict[str, float]) -> None:
    _record("ragen_on_metrics", step)
