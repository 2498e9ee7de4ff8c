"""Training on a served env: ``ragen env serve`` in another process on 127.0.0.1, ``env: remote`` in a ``ragen train``
run in a third; then the server is killed mid-run, which costs the episodes that used it, never the run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.needs import needs_plugin
from tests.plain_recipe import PLAIN

pytest.importorskip("openenv")
needs_plugin("ragen-plugins-envs", "the served env is a built-in")
needs_plugin("ragen-plugins-torch", "the run trains the tiny model")

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

SERVED = "frozenlake_3x3"
SHAPE = [*PLAIN, "rollout.group_size=2", "rollout.max_turn=2", "rollout.max_new_tokens=12", "rollout.val_env_groups=2",
         "rollout.val_group_size=1", "trainer.name=torch", "trainer.model=tiny", "estimator=grpo", "filter=none",
         "trainer.mini_batch_size=4", "trainer.micro_batch_size=4", "trainer.warm_start_steps=0", "trainer.val_every=0",
         "trainer.save_every=0", "run.log_level=error"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RAGEN_")} | {"OMP_NUM_THREADS": "1"}


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``ragen env serve frozenlake_3x3 --port 0`` in another process; yields it and its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "ragen_core", "env", "serve", SERVED, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the server prints its address once it listens
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, line + (proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
        yield proc, found.group(0)
    finally:
        proc.kill()
        proc.wait(30)


def steps(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if "rollout/env_errors" in r]


def test_a_run_trains_on_a_served_env_and_survives_the_server_dying(server: tuple[Any, str], tmp_path: Path) -> None:
    """Step 1 trains on a local env and the served one (the same boards as in process); then the server is killed
    with no goodbye, and the later steps lose the served env's episodes, counted, and nothing else."""
    from ragen_core.plugins import build_plugin_manager, collect_registries

    proc, url = server
    run = tmp_path / "run"
    envs = (f"envs=[{{name: {SERVED}, groups: 2}}, "
            f"{{name: remote, groups: 2, options: {{url: '{url}', env: {SERVED}, timeout: 20}}}}]")
    train = subprocess.Popen([sys.executable, "-m", "ragen_core", "train", *SHAPE, envs, "rollout.env_groups=4",
                              "trainer.steps=3", "--run-dir", str(run)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=_env())
    try:
        deadline = time.monotonic() + 300
        while not steps(run):  # step 1 trained on both envs ...
            assert train.poll() is None and time.monotonic() < deadline, train.stdout.read() if train.stdout else ""
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)  # ... then the server dies, with no goodbye
        out, _ = train.communicate(timeout=300)
    finally:
        train.kill()
    assert train.returncode == 0, out
    done = steps(run)
    assert len(done) == 3 and done[0]["rollout/env_errors"] == 0 and done[0]["rollout/remote/success"] >= 0
    made = collect_registries(build_plugin_manager()).envs
    served = [s for s in map(json.loads, (run / "samples.jsonl").read_text().splitlines())
              if s["step"] == 1 and s["env"] == "remote"]
    assert served and all(s["env_error"] is None for s in served)
    for sample in served:  # the served board, as a local run has it
        assert sample["turns"][0]["observation"] == made.make(SERVED).reset(seed=sample["seed"])[0]
    later = [s["rollout/env_errors"] for s in done[1:]]
    assert all(n <= 4 for n in later) and later[-1] == 4, later  # at most, and at last, every remote episode
    assert all(s["rollout/frozenlake_3x3/success"] >= 0 for s in done)  # the local env's episodes still ran
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3


def test_a_server_killed_mid_rollout_fails_the_episodes_in_flight(server: tuple[Any, str]) -> None:
    """The rollout itself, deterministically: every episode has reset and taken its first step on the server when
    the policy's second call kills it; each episode then ends with its error, and the batch is whole."""
    from ragen_core.config import RolloutConfig
    from ragen_core.plugins import build_plugin_manager, collect_registries
    from ragen_core.starpo.chat import ChatCodec, TextTokenizer
    from ragen_core.starpo.metrics import rollout_metrics
    from ragen_core.starpo.rollout import ScriptedPolicy, make_episodes, run_lockstep

    proc, url = server
    config = RolloutConfig(max_turn=4, max_actions_per_turn=1, max_new_tokens=32)
    episodes = make_episodes(collect_registries(build_plugin_manager()).envs,
                             [("remote", 3, {"url": url, "env": SERVED, "timeout": 20})], seeds=[5, 6, 7],
                             group_size=2, config=config, codec=ChatCodec(TextTokenizer(), think=config.think))
    scripted = ScriptedPolicy.for_episodes(episodes, "random", seed=1)
    calls = []

    def generate(requests: list[Any]) -> list[Any]:
        calls.append(len(requests))
        if len(calls) == 2:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        return scripted.generate(requests)

    scripted_policy = type("Killing", (), {"tokenizer": scripted.tokenizer, "generate": staticmethod(generate)})()
    batch = run_lockstep(episodes, scripted_policy)
    assert len(batch) == 6 and calls[0] == 6
    finished_first = [t for t in batch if t.env_error is None]  # an episode its first move ended (on the goal)
    failed = [t for t in batch if t.env_error is not None]
    assert failed and len(failed) + len(finished_first) == 6
    assert all(len(t.turns) == 2 and "OpenEnv server" in t.env_error for t in failed), [t.env_error for t in failed]
    assert all(t.turns[0].info.get("action_is_valid") is not None for t in failed)  # the first step was served
    assert rollout_metrics(batch)["rollout/env_errors"] == len(failed)
