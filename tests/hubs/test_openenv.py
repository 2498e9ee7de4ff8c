"""OpenEnv: ragen envs served over OpenEnv's protocol (``ragen env serve``), the ``remote`` env that plays them, and
the ``openenv`` env that plays any OpenEnv server. Servers run on 127.0.0.1 (in a thread, or in another process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.needs import needs_plugin

pytest.importorskip("openenv")
needs_plugin("ragen-plugins-envs", "the served envs are the built-ins")

from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, Observation, State  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from pydantic import Field  # noqa: E402

from ragen_core.checks import check_env  # noqa: E402
from ragen_core.errors import EnvError  # noqa: E402
from ragen_core.plugins import build_plugin_manager, collect_registries  # noqa: E402
from ragen_plugins_openenv.envs import OpenEnvEnv, RemoteEnv  # noqa: E402
from ragen_plugins_openenv.server import build_app, listen  # noqa: E402

ENVS = collect_registries(build_plugin_manager()).envs
FROZEN = "frozenlake_3x3"


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on a free port of 127.0.0.1; yields its URL."""
    import uvicorn

    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", ws="websockets-sansio"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def served(name: str, **kw: Any) -> contextlib.AbstractContextManager[str]:
    return serving(build_app(lambda: ENVS.make(name), name, **kw))


@pytest.fixture(scope="module")
def lake() -> Iterator[str]:
    with served(FROZEN) as url:
        yield url


# ------------------------------------------------------------------------------------------------ remote


def test_a_served_env_passes_the_contract_kit(lake: str) -> None:
    check_env(lambda: RemoteEnv(url=lake, env=FROZEN))


def test_remote_takes_the_prompt_from_the_served_env(lake: str) -> None:
    local, remote = ENVS.make(FROZEN), RemoteEnv(url=lake, env=FROZEN)
    assert remote.reset(seed=4)[0] == local.reset(seed=4)[0]
    assert (remote.instruction, remote.action_names, remote.legend, remote.max_actions_per_traj) == \
        (local.instruction, tuple(local.action_names), dict(local.legend), local.max_actions_per_traj)
    assert remote.state_key() == local.state_key()
    remote.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), actions=st.lists(st.sampled_from(["Up", "Down", "Left", "Right", "", "jump",
                                                                        "up ", "Ω"]), max_size=8))
def test_remote_episodes_equal_local_ones(lake: str, seed: int, actions: list[str]) -> None:
    """The independent reference is the same env in this process: same seed, same actions, same everything."""
    local, remote = ENVS.make(FROZEN), RemoteEnv(url=lake, env=FROZEN)
    assert remote.reset(seed=seed) == local.reset(seed=seed)
    for action in actions:
        mine, theirs = remote.step(action), local.step(action)
        assert mine[:4] == theirs[:4] and mine[4] == json.loads(json.dumps(theirs[4]))
        assert remote.state_key() == local.state_key()
        if mine[2] or mine[3]:
            break
    remote.close()


def test_openenvs_own_client_plays_a_served_env(lake: str) -> None:
    """The protocol is OpenEnv's exactly: its own generic client plays a ragen env."""
    local = ENVS.make(FROZEN)
    obs, _ = local.reset(seed=7)
    with GenericEnvClient(base_url=lake).sync() as client:
        first = client.reset(seed=7)
        assert first.observation["text"] == obs and first.observation["prompt"]["env"] == FROZEN
        step = client.step({"text": "Down"})
    obs, reward, terminated, truncated, info = local.step("Down")
    assert (step.observation["text"], step.reward, step.done) == (obs, reward, terminated or truncated)
    assert step.observation["info"]["action_is_valid"] == info["action_is_valid"]


def test_the_wrong_served_env_or_a_plain_openenv_server_is_refused(lake: str) -> None:
    with pytest.raises(EnvError, match="serves the env 'frozenlake_3x3', not 'sokoban'"):
        RemoteEnv(url=lake, env="sokoban").reset(seed=0)
    with served_native() as url, pytest.raises(EnvError, match="not a ragen env server"):
        RemoteEnv(url=url).reset(seed=0)


def test_a_key_guards_every_route_but_health(monkeypatch: pytest.MonkeyPatch) -> None:
    with served(FROZEN, key="s3cret") as url:
        with pytest.raises(EnvError, match="HTTP 403") as err:
            RemoteEnv(url=url).reset(seed=0)
        assert "key" in (err.value.hint or "")
        monkeypatch.setenv("MY_KEY", "wrong")
        with pytest.raises(EnvError, match="HTTP 403"):
            RemoteEnv(url=url, key_env="MY_KEY").reset(seed=0)
        monkeypatch.setenv("MY_KEY", "s3cret")
        env = RemoteEnv(url=url, key_env="MY_KEY")
        assert env.reset(seed=0)[0] == ENVS.make(FROZEN).reset(seed=0)[0]
        env.close()
        with pytest.raises(urllib.error.HTTPError) as http:
            urllib.request.urlopen(f"{url}/schema", timeout=10)
        assert http.value.code == 401
        with urllib.request.urlopen(f"{url}/health", timeout=10) as health:
            assert health.status == 200


def test_sessions_beyond_the_limit_are_refused_and_freed_on_close() -> None:
    with served(FROZEN, max_sessions=1) as url:
        first = RemoteEnv(url=url)
        first.reset(seed=0)
        with pytest.raises(EnvError, match="CAPACITY_REACHED|capacity"):
            RemoteEnv(url=url).reset(seed=0)
        first.close()
        deadline = time.monotonic() + 10
        while True:  # the server frees the session when the connection closes
            again = RemoteEnv(url=url)
            try:
                again.reset(seed=1)
                break
            except EnvError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        again.close()


def test_an_env_that_raises_on_the_server_fails_that_episode_only(lake: str) -> None:
    class Exploding:
        def __init__(self) -> None:
            self.env = ENVS.make(FROZEN)
            self.instruction, self.action_names, self.legend = "x", ("Go",), {}
            self.max_actions_per_traj = 3

        def reset(self, seed: int | None = None) -> Any:
            return self.env.reset(seed=seed)

        def step(self, action: str) -> Any:
            raise RuntimeError("the env broke")

    with serving(build_app(Exploding, "exploding")) as url:
        env = RemoteEnv(url=url)
        env.reset(seed=0)
        with pytest.raises(EnvError, match="the env broke"):
            env.step("Go")
        env.close()
    other = RemoteEnv(url=lake)  # another server, another session: unaffected
    assert other.reset(seed=0)[0]
    other.close()


def test_an_unreachable_server_fails_fast() -> None:
    # bound and never listened on: the port refuses connections, and no server another test (another xdist worker)
    # starts meanwhile can take it, as it could take a port found free and released
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        start = time.monotonic()
        with pytest.raises(EnvError, match="unreachable"):
            RemoteEnv(url=f"http://127.0.0.1:{sock.getsockname()[1]}").reset(seed=0)
        assert time.monotonic() - start < 5


# ------------------------------------------------------------------------------------------------ openenv


class CountAction(Action):
    """Add ``value`` (0..9) to the counter."""

    value: int = Field(ge=0, le=9)


class CountObservation(Observation):
    total: int = 0
    message: str = ""
    success: bool = False


class CountTo(Environment):
    """A native OpenEnv env (not ragen's): reach exactly 10; going over ends the episode unsuccessfully."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    delay = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.total, self._state = 0, State(step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> CountObservation:
        self.total = (seed or 0) % 5
        return CountObservation(total=self.total, message=f"total {self.total}; reach 10")

    def step(self, action: Any, timeout_s: float | None = None, **_: Any) -> CountObservation:
        time.sleep(self.delay)
        self.total += action.value
        done = self.total >= 10
        return CountObservation(total=self.total, message=f"total {self.total}", done=done,
                                reward=1.0 if self.total == 10 else 0.0, success=self.total == 10)

    @property
    def state(self) -> State:
        return self._state


def served_native(factory: Callable[[], Environment] = CountTo) -> contextlib.AbstractContextManager[str]:
    return serving(create_fastapi_app(factory, CountAction, CountObservation, max_concurrent_envs=8))


def test_openenv_plays_a_native_server_by_its_schema() -> None:
    with served_native() as url:
        env = OpenEnvEnv(url=url, max_actions=5)
        assert env.reset(seed=3) == ("total 3; reach 10", {"success": False, "action_is_valid": True,
                                                            "action_is_effective": True})
        obs, reward, terminated, _, info = env.step(" 4 ")  # the schema says integer: the text is converted
        assert (obs, reward, terminated, info["success"], info["action_is_valid"]) == ("total 7", 0.0, False,
                                                                                      False, True)
        for bad in ("four", "12", "-1", "3.5", ""):  # not an integer, or one the schema refuses (0..9)
            assert env.step(bad)[1:] == (-0.1, False, False, {"success": False, "action_is_valid": False,
                                                              "action_is_effective": False})
        assert env.render() == "total 7"
        obs, reward, terminated, _, info = env.step("3")
        assert (obs, reward, terminated, info["success"]) == ("total 10", 1.0, True, True)
        assert env.step("1")[4]["action_is_valid"] is False  # the episode is over
        env.close()
        check_env(lambda: OpenEnvEnv(url=url))


def test_openenv_options_pick_fields_and_name_what_is_wrong() -> None:
    with served_native() as url:
        env = OpenEnvEnv(url=url, observation_field="total", success_field="success")
        assert env.reset(seed=1)[0] == "1"
        env.close()
        with pytest.raises(EnvError, match="no field 'amount'") as err:
            bad = OpenEnvEnv(url=url, action_field="amount")
            bad.reset(seed=0)
            bad.step("1")
        assert "value" in (err.value.hint or "")


def test_a_slow_server_fails_the_step_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CountTo, "delay", 3.0)
    with served_native() as url:
        env = OpenEnvEnv(url=url, timeout=0.5)
        env.reset(seed=0)
        start = time.monotonic()
        with pytest.raises(EnvError, match="did not answer 'step' within 0.5 s"):
            env.step("1")
        assert time.monotonic() - start < 2.5
        env.close()


def test_bad_urls_are_config_errors() -> None:
    from ragen_core.errors import ConfigError

    for bad in ("localhost:8100", "ftp://x", "http://"):
        with pytest.raises(ConfigError, match="url"):
            ENVS.make("remote", {"url": bad})


def test_the_served_app_lists_openenv_routes(lake: str) -> None:
    with urllib.request.urlopen(f"{lake}/metadata", timeout=10) as r:
        assert json.loads(r.read())["name"] == FROZEN
    with urllib.request.urlopen(f"{lake}/schema", timeout=10) as r:
        schema = json.loads(r.read())
    assert schema["action"]["required"] == ["text"] and "prompt" in schema["observation"]["properties"]


def test_the_env_plugin_registers_its_envs_and_command() -> None:
    assert {"openenv", "remote"} <= set(ENVS.names())
    from click.testing import CliRunner

    from ragen_core.cli import build_cli

    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["env", "serve", "--help"])
    assert res.exit_code == 0 and "OpenEnv" in res.output and "--max-sessions" in res.output
    res = CliRunner().invoke(build_cli(build_plugin_manager()), ["env", "serve", "frozenlak"])
    assert res.exit_code != 0 and "did you mean 'frozenlake'" in res.output


def test_asyncio_is_untouched() -> None:
    """The sync client runs no event loop of its own: a caller inside asyncio can still use it (in a thread)."""
    async def main() -> str:
        with served_native() as url:
            env = OpenEnvEnv(url=url)
            obs = await asyncio.get_running_loop().run_in_executor(None, lambda: env.reset(seed=2)[0])
            env.close()
            return obs

    assert asyncio.run(main()) == "total 2; reach 10"
