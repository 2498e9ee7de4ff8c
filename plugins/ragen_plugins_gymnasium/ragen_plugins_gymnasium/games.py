"""What the adapter knows about particular gymnasium envs: action names, rules, legend, colour marks, success.

Games are found by their entry point (``"gymnasium.envs.toy_text.frozen_lake:FrozenLakeEnv"``), so every id built on
one class shares its entry (``FrozenLake-v1`` and ``FrozenLake8x8-v1``; ``CliffWalking-v1`` and
``CliffWalkingSlippery-v1``). An env not listed here works too, with generic defaults (actions ``"0"`` ..
``"n-1"``, a generated instruction, generic colour notes, success = terminated with a positive reward).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ragen_plugins_gymnasium.ansi import IGNORE, Mark

__all__ = ["GAMES", "Game", "game_for"]


@attrs.frozen(kw_only=True)
class Game:
    """The adapter's knowledge of one gymnasium env class.

    :ivar action_names: the names of the Discrete actions, in index order.
    :ivar rules: a few sentences for the instruction: the goal, the moves, the rewards.
    :ivar legend: symbol -> meaning for the rendered state (after :attr:`marks` are applied).
    :ivar marks: style attribute (``"bg:red"``) -> :class:`~ragen_plugins_gymnasium.ansi.Mark` for its "ansi" render.
    :ivar success: the success rule ``success: auto`` picks (see :class:`~ragen_plugins_gymnasium.env.GymnasiumConfig`).
    :ivar describe: turns an observation that is not text (Blackjack's tuple) into a sentence, or None.
    """

    action_names: tuple[str, ...]
    rules: str
    legend: Mapping[str, str] = attrs.field(factory=dict)
    marks: Mapping[str, Mark] = attrs.field(factory=dict)
    success: str = "positive_reward"
    describe: Callable[[Any], str] | None = None


def _blackjack(obs: Any) -> str:
    """Blackjack's ``(player sum, dealer's card, usable ace)`` as a sentence."""
    total, dealer, ace = (int(v) for v in obs)
    card = "an ace" if dealer == 1 else str(dealer)
    held = "You hold a usable ace (counted as 11)." if ace else "You hold no usable ace."
    return f"Your cards sum to {total}. The dealer shows {card}. {held}"


_FROZEN_LAKE = Game(
    action_names=("Left", "Down", "Right", "Up"),
    rules="You walk on a frozen lake from the start S to the goal G. Stepping into a hole H ends the game; reaching G "
          "wins it (reward 1, every other step 0). Moving into the edge leaves you where you are. If the ice is "
          "slippery, a move may take you in a perpendicular direction instead. The line in parentheses above the "
          "grid names your last move.",
    legend={"P": "you", "S": "the start", "F": "frozen ice (safe)", "H": "a hole", "G": "the goal"},
    marks={"bg:red": Mark("you", "P")},
)

_TAXI = Game(
    action_names=("South", "North", "East", "West", "Pickup", "Dropoff"),
    rules="You drive a taxi on a 5x5 grid with four stops R, G, Y, B. Drive to the passenger's stop, pick the "
          "passenger up, drive to the destination and drop them off. South moves down the grid, North up, East "
          "right, West left; the taxi cannot cross a wall '|'. Every step costs 1, a pickup or dropoff in the wrong "
          "place costs 10, delivering the passenger earns 20 and ends the game. Under the grid, a line in "
          "parentheses names your last move and the notes say where the passenger waits and where they are going.",
    legend={"T": "the taxi (empty)", "@": "the taxi with the passenger aboard", "R, G, Y, B": "the four stops",
            "|": "a wall", ":": "no wall"},
    marks={"bg:yellow": Mark("the taxi (empty)", "T"), "bg:green": Mark("the taxi with the passenger aboard", "@"),
           "fg:blue": Mark("passenger waiting at"), "fg:magenta": Mark("destination"), "bold": IGNORE},
)

_CLIFF_WALKING = Game(
    action_names=("Up", "Right", "Down", "Left"),
    rules="You walk on a 4x12 grid from the start (bottom left) to the target T (bottom right). The cells C along "
          "the bottom edge are a cliff: stepping onto it costs 100 and sends you back to the start. Every step costs "
          "1; reaching T ends the game. If the ground is slippery, a move may go in another direction.",
    legend={"x": "you", "o": "safe ground", "C": "the cliff", "T": "the target"},
    success="terminated",
)

_BLACKJACK = Game(
    action_names=("Stick", "Hit"),
    rules="You play Blackjack against the dealer: get a hand closer to 21 than the dealer's without going over. Hit "
          "draws another card; Stick ends your turn and the dealer plays. Face cards count 10 and an ace 1 or 11. "
          "Winning earns 1, a draw 0, losing (or going over 21) costs 1.",
    describe=_blackjack,
)

#: entry point of a gymnasium env class -> what the adapter knows about it
GAMES: Mapping[str, Game] = {
    "gymnasium.envs.toy_text.frozen_lake:FrozenLakeEnv": _FROZEN_LAKE,
    "gymnasium.envs.toy_text.taxi:TaxiEnv": _TAXI,
    "gymnasium.envs.toy_text.cliffwalking:CliffWalkingEnv": _CLIFF_WALKING,
    "gymnasium.envs.toy_text.blackjack:BlackjackEnv": _BLACKJACK,
}


def game_for(entry_point: Any) -> Game | None:
    """The :class:`Game` of a spec's entry point (a ``"module:Class"`` string or the class itself), or None."""
    if not isinstance(entry_point, str):
        entry_point = f"{getattr(entry_point, '__module__', '')}:{getattr(entry_point, '__qualname__', '')}"
    return GAMES.get(entry_point)
