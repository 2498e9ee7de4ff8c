"""The core's side of sinks (the sink registry, the ``sinks:`` section, ``ragen_on_metrics``) and the ``sinks``
plugin driving a third-party sink: options, failure isolation, closing on success and on failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import structlog

from ragen_core import hookimpl
from ragen_core.config import load_config, resolve_config
from ragen_core.errors import ConfigError
from ragen_core.plugins import build_plugin_manager, collect_registries
from ragen_core.runner import execute, run_scripted, start_run
from tests.core.toy import ToyPlugin, toy_config_overrides

#: what every MemorySink saw, by its tag: ("open" | "close", ...) and (step, metrics) tuples
SEEN: dict[str, list[Any]] = {}


@attrs.define
class MemoryConfig:
    tag: str = "a"
    every: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    fail_on: Literal["none", "create", "open", "write", "close"] = "none"
    fail_at_step: int = 0


class MemorySink:
    """A third-party sink that remembers what it got, and fails where told."""

    config_cls = MemoryConfig

    def __init__(self, config: MemoryConfig) -> None:
        if config.fail_on == "create":
            raise RuntimeError("cannot create")
        self.config = config
        self.log = SEEN.setdefault(config.tag, [])

    def open(self, run: Any) -> None:
        if self.config.fail_on == "open":
            raise OSError("cannot open")
        self.log.append(("open", run.mode))

    def write(self, step: int, metrics: Any) -> None:
        if self.config.fail_on == "write" and step == self.config.fail_at_step:
            raise OSError("disk full")
        if step % self.config.every == 0:
            self.log.append((step, dict(metrics)))

    def close(self, status: str) -> None:
        self.log.append(("close", status))
        if self.config.fail_on == "close":
            raise OSError("cannot close")


class SinkPlugin:
    """Registers the memory sink, and a sink whose module is not installed."""

    @hookimpl
    def ragen_register_sinks(self, registry: Any) -> None:
        registry.register("memory", "tests.sinks.test_core:MemorySink", description="remembers records")
        registry.register("needs_pkg", "tests.sinks.test_core:MemorySink", requires=["no_such_module_for_ragen"],
                          install_hint="pip install no-such-module-for-ragen")


class MetricsRecorder:
    """Records every ``ragen_on_metrics`` call, and tries to change the record it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, float]]] = []

    @hookimpl
    def ragen_on_metrics(self, run: Any, step: int, metrics: dict[str, float]) -> None:
        self.calls.append((run.mode, step, dict(metrics)))
        metrics["recorder/injected"] = 1.0


class Crasher:
    """Fails the run at step 2."""

    @hookimpl
    def ragen_on_step_end(self, ctx: Any) -> None:
        if ctx.step == 2:
            raise RuntimeError("boom at step 2")


def make_run(tmp_path: Path, *plugins: Any, overrides: tuple[str, ...] = (), with_sinks_plugin: bool = True) -> Any:
    environ = {"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGEN_PLUGINS": "sinks" if with_sinks_plugin else ""}
    pm = build_plugin_manager(environ=environ, plugins=[ToyPlugin(), SinkPlugin(), *plugins])
    regs = collect_registries(pm)
    resolved = resolve_config(load_config(overrides=[*toy_config_overrides(), *overrides]), regs, pm)
    return start_run(resolved, regs, pm, "rollout", tmp_path / "run")


def lines(run: Any) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    SEEN.clear()


# ------------------------------------------------------------------------------------------- config and registry

def test_sinks_section_resolves_against_the_registry(tmp_path: Path) -> None:
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"}, plugins=[ToyPlugin(), SinkPlugin()])
    regs = collect_registries(pm)
    cfg = load_config(overrides=[*toy_config_overrides(), "sinks=[memory, {name: memory, tag: b, every: 2}]"])
    resolved = resolve_config(cfg, regs, pm)
    assert resolved.sinks == [("memory", MemoryConfig()), ("memory", MemoryConfig(tag="b", every=2))]
    assert resolved.to_data()["sinks"][1] == {"name": "memory", "tag": "b", "every": 2, "fail_on": "none",
                                              "fail_at_step": 0}
    assert regs.sinks.get("needs_pkg").describe()["requires"] == ["no_such_module_for_ragen"]
    assert regs.sinks.get("memory").plugin  # attributed to the registering plugin
    assert load_config().sinks == [] and resolve_config(load_config(overrides=toy_config_overrides()),
                                                        regs, pm).sinks == []


@pytest.mark.parametrize(("override", "message", "hint"), [
    ("sinks=[memroy]", "sinks[0]: unknown sink 'memroy'; did you mean 'memory'?", "known sinks: memory, needs_pkg"),
    ("sinks=[{name: memory, evry: 2}]", "unknown config key 'sinks[0].evry'", "did you mean 'sinks[0].every'?"),
    ("sinks=[memory, {name: memory, every: 0}]", "sinks[1].every: must be >= 1", None),
    ("sinks=[needs_pkg]", "sinks[0]: sink 'needs_pkg' needs no_such_module_for_ragen, which is not installed",
     "pip install no-such-module-for-ragen"),
])
def test_bad_sinks_are_config_errors_even_when_lenient(override: str, message: str, hint: str | None) -> None:
    pm = build_plugin_manager(environ={"RAGEN_DISABLE_PLUGIN_AUTOLOAD": "1"}, plugins=[ToyPlugin(), SinkPlugin()])
    regs = collect_registries(pm)
    for strict in (True, False):
        with pytest.raises(ConfigError) as info:
            resolve_config(load_config(overrides=[*toy_config_overrides(), override]), regs, pm, strict=strict)
        assert message in str(info.value)
        if hint:
            assert info.value.hint and hint in info.value.hint


# ------------------------------------------------------------------------------------------- ragen_on_metrics

def test_on_metrics_gets_every_record_of_metrics_jsonl(tmp_path: Path) -> None:
    rec = MetricsRecorder()
    run = make_run(tmp_path, rec, with_sinks_plugin=False)

    def body(r: Any) -> dict[str, Any]:
        r.write_metrics(0, {"val/success": 0.5})  # a record outside the step loop (e.g. the initial validation)
        return run_scripted(r, policy="oracle", steps=2, progress=False)

    execute(run, body)
    written = lines(run)
    assert [(mode, step) for mode, step, _ in rec.calls] == [("rollout", 0), ("rollout", 1), ("rollout", 2)]
    assert [{"step": step, **m} for _, step, m in rec.calls] == written  # exactly the JSONL records
    assert all("recorder/injected" not in line for line in written)  # the hook got a copy


# ------------------------------------------------------------------------------------------- the sinks plugin

def test_selected_sinks_are_opened_written_and_closed(tmp_path: Path) -> None:
    run = make_run(tmp_path, overrides=("sinks=[{name: memory, tag: a}, {name: memory, tag: b, every: 2}]",))
    result = execute(run, lambda r: run_scripted(r, policy="oracle", steps=3, progress=False))
    assert result["status"] == "completed"
    written = [(line.pop("step"), line) for line in lines(run)]
    assert SEEN["a"] == [("open", "rollout"), *written, ("close", "completed")]
    assert SEEN["b"] == [("open", "rollout"), written[1], ("close", "completed")]


def test_a_run_without_sinks_opens_none(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    execute(run, lambda r: run_scripted(r, policy="oracle", steps=1, progress=False))
    assert SEEN == {} and "ragen_plugins_sinks.sinks" not in run.state


@pytest.mark.parametrize("fail_on", ["create", "open", "write", "close"])
def test_a_failing_sink_warns_once_and_the_run_goes_on(tmp_path: Path, fail_on: str) -> None:
    with structlog.testing.capture_logs() as logs:
        run = make_run(tmp_path, overrides=(
            f"sinks=[{{name: memory, tag: bad, fail_on: {fail_on}, fail_at_step: 2}}, {{name: memory, tag: good}}]",))
        result = execute(run, lambda r: run_scripted(r, policy="oracle", steps=3, progress=False))
    assert result["status"] == "completed" and len(lines(run)) == 3
    warnings = [e for e in logs if e["event"] == "sink_failed"]
    assert len(warnings) == 1, logs
    assert warnings[0]["sink"] == "sinks[0] (memory)" and warnings[0]["action"] == fail_on
    assert "metrics.jsonl still has every metric" in warnings[0]["note"]
    assert [e for e in SEEN["good"] if isinstance(e[0], int)] == [(line.pop("step"), line) for line in lines(run)]
    bad = SEEN.get("bad", [])
    steps = [e[0] for e in bad if isinstance(e[0], int)]
    assert steps == {"create": [], "open": [], "write": [1], "close": [1, 2, 3]}[fail_on]
    if fail_on in ("open", "write", "close"):
        assert bad.count(("close", "completed")) == 1  # a failed sink is still closed, once


def test_sinks_are_closed_as_failed_when_the_run_fails(tmp_path: Path) -> None:
    run = make_run(tmp_path, Crasher(), overrides=("sinks=[memory]",))
    with pytest.raises(RuntimeError, match="boom at step 2"):
        execute(run, lambda r: run_scripted(r, policy="oracle", steps=3, progress=False))
    assert [e[0] for e in SEEN["a"]] == ["open", 1, "close"] and SEEN["a"][-1] == ("close", "failed")
    assert json.loads((run.run_dir / "summary.json").read_text())["status"] == "failed"
