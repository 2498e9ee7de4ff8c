"""The TextArena adapter (ragen-plugins-textarena): registration, the env contract on single- and two-player games,
fuzzing, determinism, rewards and success against TextArena's own results, invalid moves, the opponents, the
shipped game list against the installed registry, bad options, and a 2-step ``ragen train``."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textarena")
pytest.importorskip("ragen_plugins_textarena")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ragen_plugins_textarena.plugin as plugin  # noqa: E402
from ragen_core.errors import ConfigError  # noqa: E402
from ragen_core.testing import check_env, fuzz_env  # noqa: E402
from ragen_plugins_textarena.env import TextArenaEnv  # noqa: E402
from ragen_plugins_textarena.game import TextArenaGame  # noqa: E402
from ragen_plugins_textarena.games import EXCLUDED, GAMES, TEXTARENA_VERSION, names  # noqa: E402
from ragen_plugins_textarena.opponents import bracketed, fillings  # noqa: E402

HANOI = ["[A C]", "[A B]", "[C B]", "[A C]", "[B A]", "[B C]", "[A C]"]  # the 7-move solution of 3 disks
SINGLE = ["TowerOfHanoi-v0", "FrozenLake-v0", "Mastermind-v0", "2048-v0-raw", "Countdown-v0-train"]
TWO = ["TicTacToe-v0", "ConnectFour-v0-train", "KuhnPoker-v0-extreme", "LiarsDice-v0", "Nim-v0-raw"]
#: resets that take seconds to minutes, depending on the seed (puzzle generation): the slow test resets each with a
#: seed measured fast (0.3 s and 3 s; seed 0 of Sudoku-v0-hard takes 14 s, seed 1 of Sokoban-v0-medium 65 s)
SLOW_RESETS = {"Sudoku-v0-hard": 1, "Sokoban-v0-medium": 0}


@pytest.fixture
def envs(ragen_register: Any, ragen_registries: Any) -> Any:
    """The env registry with only this plugin registered, through the contract kit's fixtures."""
    ragen_register(plugin, name="textarena")
    return ragen_registries().envs


def _textarena_episode(game: str, moves: list[str], players: int) -> tuple[dict[int, Any], dict[int, Any]]:
    """Play ``moves`` (all players' moves in turn order) in TextArena itself, as its README's loop does; the
    rewards and game info of ``env.close()``."""
    import textarena as ta

    env = ta.make(game)
    with contextlib.redirect_stdout(io.StringIO()):
        env.reset(num_players=players, seed=0)
        for move in moves:
            env.get_observation()
            done, _info = env.step(move)
        assert done
        return env.close()


# -- registration --------------------------------------------------------------------------------------------------


def test_registers_the_env_and_the_ta_namespace(envs: Any) -> None:
    spec = envs.get("textarena")
    assert spec.plugin == "textarena" and spec.hints.max_actions_per_turn == 1
    assert set(spec.guide) == {"rules", "actions", "rewards", "success"}
    env = envs.make("textarena", {"game": "TowerOfHanoi-v0"})
    assert isinstance(env, TextArenaEnv) and env.players == 1
    space = envs.namespace("ta")
    assert space.env == "textarena" and space.option == "game" and space.members() == names()
    env = envs.make("ta.TicTacToe-v0")
    assert env.config.game == "TicTacToe-v0" and env.players == 2
    with pytest.raises(ConfigError, match="did you mean 'TowerOfHanoi-v0'"):
        envs.make("ta.TowerOfHanoi-v9")


def test_registration_and_the_name_list_import_nothing_of_textarena() -> None:
    code = ("import sys, time; t = time.perf_counter(); import ragen_plugins_textarena.plugin as p, "
            "ragen_plugins_textarena.games as g; n = g.names(); "
            "print(len(n), 'textarena' in sys.modules, 'numpy' in sys.modules, time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:3] == [str(len(GAMES)), "False", "False"]


# -- the contract --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("game", SINGLE + TWO)
def test_env_contract(envs: Any, game: str) -> None:
    check_env(lambda: envs.make("textarena", {"game": game, "max_turns": 12}), n_random_actions=40, max_steps=12)


MOVES = st.one_of(st.text(max_size=80), st.from_regex(r"\[?\s*[A-Ca-c0-9]?[ ,]*[A-Ca-c0-9]?\s*\]?", fullmatch=True),
                  st.sampled_from(["[4]", "[A C]", "[0]", "[col 3]", "[8]", "", "[[", "]["]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(game=st.sampled_from(["TowerOfHanoi-v0", "TicTacToe-v0", "ConnectFour-v0-raw", "Nim-v0"]),
       actions=st.lists(MOVES, min_size=1, max_size=12), seed=st.integers(0, 2**31 - 1))
def test_arbitrary_text_never_raises_and_invalid_moves_change_nothing(game: str, actions: list[str], seed: int) -> None:
    env = TextArenaEnv(game=game, max_turns=8)

    def check(action: Any, step: tuple[Any, ...], before: str) -> None:
        obs, reward, terminated, truncated, info = step
        if not info["action_is_valid"] and not terminated:
            assert reward == 0.0 and "[GAME]" in obs and info["invalid_reason"]
        won = info.get("textarena_reward", 0.0) >= (1.0 if env.players == 1 else 0.5)  # these games: 1 is a win
        assert info["success"] == (terminated and won)

    fuzz_env(env, actions, seed=seed, check=check)


# -- determinism -------------------------------------------------------------------------------------------------


def _trace(env: TextArenaEnv, seed: int, moves: list[str]) -> list[Any]:
    trace: list[Any] = [env.reset(seed=seed)[0]]
    for move in moves:
        trace.append(env.step(move)[:4])
    return trace


def test_the_same_seed_replays_the_same_game_whatever_runs_beside_it() -> None:
    moves = ["[4]", "[0]", "[8]", "[2]", "[6]", "[1]", "[3]"]
    a, b = TextArenaEnv(game="TicTacToe-v0"), TextArenaEnv(game="TicTacToe-v0")
    alone = _trace(a, 5, moves)
    random.seed(123)
    outside = [random.random() for _ in range(3)]
    random.seed(123)
    b.reset(seed=99)
    interleaved = [a.reset(seed=5)[0]]
    for move in moves:  # another game (another seed) steps between every two steps
        interleaved.append(a.step(move)[:4])
        b.step(move)
    assert interleaved == alone
    assert [random.random() for _ in range(3)] == outside  # the caller's generator is left as it was
    poker = [_trace(TextArenaEnv(game="KuhnPoker-v0"), seed, ["[check]"])[0] for seed in range(6)]
    assert len(set(poker)) > 1  # the seed deals the cards


# -- rewards, success and invalid moves, against TextArena ---------------------------------------------------------


def test_the_hanoi_solution_wins_as_in_textarena() -> None:
    env = TextArenaEnv(game="TowerOfHanoi-v0")
    env.reset(seed=0)
    steps = [env.step(move.strip("[]")) for move in HANOI]  # the id's ActionFormattingWrapper adds the brackets
    assert [s[1] for s in steps] == [0.0] * 6 + [1.0] and [s[2] for s in steps] == [False] * 6 + [True]
    assert steps[-1][4]["success"] and steps[-1][4]["textarena_reward"] == 1.0
    rewards, _info = _textarena_episode("TowerOfHanoi-v0", HANOI, 1)
    assert rewards == {0: 1}
    assert env.step("[A C]")[4]["action_is_valid"] is False  # after the end: invalid, still over


def test_a_two_player_win_and_loss_score_as_in_textarena() -> None:
    env = TextArenaEnv(game="TicTacToe-v0", opponent="first")  # the first move listed that the game accepts
    env.reset(seed=0)
    steps = [env.step(move) for move in ["[4]", "[1]", "[7]"]]
    assert "[Player 1] [0]" in steps[0][0] and "[Player 1] [2]" in steps[1][0]
    assert steps[-1][1:3] == (1.0, True) and steps[-1][4]["success"]
    rewards, _ = _textarena_episode("TicTacToe-v0", ["[4]", "[0]", "[1]", "[2]", "[7]"], 2)
    assert rewards == {0: 1, 1: -1}
    env.reset(seed=0)
    mine = ["[8]", "[5]", "[3]", "[7]"]
    steps = [env.step(move) for move in mine]
    theirs = re.findall(r"\[Player 1\] (\[\d\])", env.render())
    assert theirs == ["[4]", "[0]", "[1]", "[2]"]  # the prompt's example first, then the lowest free cell
    assert steps[-1][1:3] == (-1.0, True) and not steps[-1][4]["success"]
    rewards, _ = _textarena_episode("TicTacToe-v0", [m for pair in zip(mine, theirs) for m in pair], 2)
    assert rewards == {0: -1, 1: 1}


def test_invalid_moves_are_undone_until_textarena_ends_the_game() -> None:
    env = TextArenaEnv(game="TicTacToe-v0", opponent="first")
    env.reset(seed=0)
    env.step("[4]")
    before = env.render()
    obs, reward, terminated, truncated, info = env.step("[4]")  # taken: TextArena lets the player retry once
    assert (reward, terminated, truncated, info["action_is_valid"]) == (0.0, False, False, False)
    assert "occupied" in info["invalid_reason"] and "attempted an invalid move" in obs and env.render() == before
    _obs, reward, terminated, _t, info = env.step("nonsense")  # the second in a row loses, as in TextArena
    assert (reward, terminated, info["action_is_valid"], info["success"]) == (-1.0, True, False, False)
    rewards, _ = _textarena_episode("TicTacToe-v0", ["[4]", "[0]", "[4]", "nonsense"], 2)
    assert rewards == {0: -1, 1: 1}
    env = TextArenaEnv(game="TicTacToe-v0", error_allowance=3, invalid_reward=-0.25)
    env.reset(seed=0)
    results = [env.step("x") for _ in range(4)]
    assert [r[1] for r in results[:3]] == [-0.25] * 3 and not any(r[2] for r in results[:3])
    assert results[3][2] and results[3][1] == -1.0


def test_the_turn_limit_truncates_without_reward() -> None:
    env = TextArenaEnv(game="TowerOfHanoi-v0", max_turns=2)
    assert env.max_actions_per_traj == 2
    env.reset(seed=0)
    assert env.step("[A C]")[1:4] == (0.0, False, False)
    _obs, reward, terminated, truncated, info = env.step("[A B]")
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)


def test_observation_modes() -> None:
    full, new = TextArenaEnv(game="TicTacToe-v0"), TextArenaEnv(game="TicTacToe-v0", observation="new")
    first_full, first_new = full.reset(seed=3)[0], new.reset(seed=3)[0]
    assert first_full == first_new and "You are Player 0 in Tic Tac Toe" in first_full
    step_full, step_new = full.step("[4]")[0], new.step("[4]")[0]
    assert step_full.startswith(first_full) and step_full.endswith(step_new)
    assert "You are Player 0" not in step_new and "[Player 1]" in step_new
    assert full.render() == new.render() == step_full


def test_a_game_where_player_1_moves_first_opens_with_the_opponent() -> None:
    env = TextArenaEnv(game="GameOfPureStrategy-v0")  # player 1 bids first (secretly)
    obs, info = env.reset(seed=0)
    assert info["opponent_moves"] == 1.0 and "Your remaining hand" in obs
    assert TextArenaEnv(game="TicTacToe-v0").reset(seed=0)[1]["opponent_moves"] == 0.0


# -- the opponents -------------------------------------------------------------------------------------------------


def test_the_scripted_opponent_only_plays_moves_the_game_accepts() -> None:
    for game in ["ConnectFour-v0", "Othello-v0", "KuhnPoker-v0", "Briscola-v0"]:
        env = TextArenaEnv(game=game, opponent="random", max_turns=6)
        obs, _ = env.reset(seed=1)
        for _ in range(6):
            move = re.findall(r"\[[^\[\]\n]{1,12}\]", obs)
            obs, _r, terminated, truncated, info = env.step(move[-1] if move else "[0]")
            assert info["opponent_rejected"] == 0.0, game
            if terminated or truncated:
                break


TOKEN = st.from_regex(r"\[[a-z0-9,:()][a-z0-9 ,:()]{0,11}\]", fullmatch=True)  # not blank: those are skipped


@given(tokens=st.lists(TOKEN, min_size=1, max_size=6), noise=st.text(max_size=40))
def test_the_opponent_reads_every_bracketed_token(tokens: list[str], noise: str) -> None:
    text = noise.replace("[", "(").replace("]", ")") + " " + ", ".join(tokens)
    found = bracketed([text])
    assert [t for t in found if t in tokens] == list(dict.fromkeys(tokens))
    assert all(t.startswith("[") and t.endswith("]") and t in text and "\n" not in t for t in bracketed([noise]))


def test_nested_tokens_and_fillings() -> None:
    rules = "Examples: [place () {(3,2): [C0]}] or [a2a3]; 'Available Moves: [b7 b5]'"
    assert bracketed([rules], frozenset({"C0"})) == ["[place () {(3,2): [C0]}]", "[a2a3]", "[b7 b5]"]
    made = list(fillings(["[a2a3]", "[bet X]"], ["board up to h8, 40 chips"], random.Random(0), 50))
    assert len(made) == len(set(made)) == 50 and made == list(
        fillings(["[a2a3]", "[bet X]"], ["board up to h8, 40 chips"], random.Random(0), 50))
    for token in made:
        squares = re.findall(r"[a-h][1-8]", token)
        assert re.fullmatch(r"\[[a-h][1-8][a-h][1-8]\]|\[bet \d+\]", token), token
        if len(squares) == 2:  # the second square is near the first
            assert abs(ord(squares[0][0]) - ord(squares[1][0])) <= 2 and abs(int(squares[0][1]) - int(squares[1][1])) <= 2
        else:
            assert 0 <= int(token[5:-1]) <= 40


class _ChatServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that answers with the first move listed in the prompt."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        self.server.prompts.append(prompt)  # type: ignore[attr-defined]
        move = re.findall(r"'(\[\d\])'", prompt.rsplit("Available Moves:", 1)[-1])[0]
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": f"I take {move}"}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_llm_opponent_asks_an_openai_compatible_endpoint() -> None:
    from tests.http_server import background_server

    with background_server(_ChatServer, prompts=[]) as (url, server):
        env = TextArenaEnv(game="TicTacToe-v0", opponent="llm", opponent_url=f"{url}/v1", opponent_model="m")
        env.reset(seed=0)
        obs = env.step("[4]")[0]
        assert "[Player 1] I take [0]" in obs and "You are Player 1 in Tic Tac Toe" in server.prompts[0]


# -- options -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"game": "TowerOfHanoi-v1"}, "did you mean 'TowerOfHanoi-v0'"),
    ({"game": "Chess-v0"}, "game: must be a TextArena game this plugin plays: 'Chess-v0' is left out, it does not"),
    ({"game": "Wordle-v0"}, "it needs NLTK data"),
    ({"game": "SecretMafia-v0"}, "it needs three or more players"),
    ({"game": 7}, "game: expected a string"),
    ({"opponent": "randm"}, "did you mean 'random'"),
    ({"opponent": "llm"}, "opponent_url: must be set for opponent 'llm'"),
    ({"opponent": "llm", "opponent_url": "http://127.0.0.1:9/v1"}, "opponent_model: must be set"),
    ({"observation": "all"}, "observation: must be one of 'textarena', 'new'"),
    ({"max_turns": 0}, "max_turns: must be an integer in [1, 100000]"),
    ({"error_allowance": -1}, "error_allowance: must be an integer >= 0"),
    ({"gmae": "TicTacToe-v0"}, "did you mean 'env textarena.game'"),
])
def test_bad_options_are_named(envs: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        envs.make("textarena", options)


# -- the shipped game list -----------------------------------------------------------------------------------------


def test_the_game_list_matches_the_installed_textarena() -> None:
    import textarena
    from textarena.envs.registration import ENV_REGISTRY

    assert TEXTARENA_VERSION == textarena.__version__
    assert set(GAMES) | set(EXCLUDED) == set(ENV_REGISTRY) and not set(GAMES) & set(EXCLUDED)
    assert set(GAMES.values()) == {1, 2} and len(GAMES) > 450
    assert {"TowerOfHanoi-v0", "TicTacToe-v0", "Sokoban-v0", "Poker-v0"} <= set(GAMES)


def test_every_listed_game_resets_offline() -> None:
    """Every listed game but the few whose reset generates a puzzle for seconds (the slow test has those)."""
    started = time.perf_counter()
    for game in names():
        if not game.startswith(tuple(SLOW_RESETS)):
            env = TextArenaEnv(game=game)
            obs, info = env.reset(seed=0)
            assert obs.strip() and info["players"] == GAMES[game], game
    assert time.perf_counter() - started < 60


@pytest.mark.slow
def test_the_slow_resets_work_too() -> None:
    for prefix, seed in SLOW_RESETS.items():
        for game in (g for g in names() if g.startswith(prefix)):
            assert TextArenaEnv(game=game).reset(seed=seed)[0].strip(), game


def _resets(game: str, players: int) -> bool:
    try:
        TextArenaGame(game, players).reset(0)
    except Exception:  # noqa: BLE001 - any failure counts
        return False
    return True


@pytest.mark.parametrize("reason", sorted(set(EXCLUDED.values())))
def test_a_left_out_game_really_fails_offline(reason: str) -> None:
    game = min(g for g, r in EXCLUDED.items() if r == reason)
    assert not _resets(game, 1) and not _resets(game, 2)


# -- training ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_training_steps_on_a_textarena_game(tmp_path: Path) -> None:
    from tests.hubs.tiny_run import train_two_steps

    name = "ta.TicTacToe-v0"
    metrics, samples = train_two_steps(tmp_path / "run", f"envs=[{{name: {name}, groups: 2, options: {{max_turns: 3}}}}]",
                                       "rollout.max_turn=3")
    assert samples and {s["env"] for s in samples} == {name} and {s["step"] for s in samples} == {1, 2}
    first = samples[0]["turns"][0]["observation"]
    assert "You are Player 0 in Tic Tac Toe" in first and "Available Moves" in first
    assert f"rollout/{name}/success" in metrics[-1]
