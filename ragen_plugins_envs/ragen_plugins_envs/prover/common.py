"""Shared tactic-step episode logic for the prover envs (RAGEN's Lean reward shape), used by Coq and Lean.

An episode proves one theorem, one tactic per step. The env keeps the accepted tactics; each step hands the new
tactic to a prover *backend* (a persistent ``coqtop`` session, or a Kimina Lean server that re-checks the theorem
with every accepted tactic plus the new one) and reads back either the remaining goals or an error.

Step outcomes and rewards (defaults in brackets; every number is a config field):

==================  ===========================================================  ==========================  ======
outcome             meaning                                                      reward                      valid
==================  ===========================================================  ==========================  ======
accepted, new       the prover accepted it and the goals are new this episode    step (-0.1) + accept (+1)   yes
accepted, repeated  accepted, but the goals equal a state already seen this      step (-0.1)                 yes
                    episode (a no-op such as ``idtac``, or a cycle)
complete            accepted and no goal remains (the proof is verified)         step + accept + success     yes
                                                                                 (-0.1 + 1 + 10 = 10.9)
rejected            the prover rejected it; the proof state is unchanged         step + reject (-1): -1.1    yes
timeout             the prover ran out of time on it; state unchanged            step + reject + timeout     yes
                                                                                 (-1): -2.1
invalid             malformed: empty, too long, control characters, a command    step + reject: -1.1         no
                    that would leave the proof or a cheat (see the backends)
prover error        the prover is unreachable/crashed after bounded retries      ``prover_error_reward``     yes
                                                                                 (0.0); the episode is
                                                                                 truncated
==================  ===========================================================  ==========================  ======

Then, if the episode did not end (no success, no prover error) and this was the ``max_steps``-th step, the step limit
adds ``max_steps_penalty`` (-2) and the episode is truncated (``truncated=True``). Every step counts, valid or not.

- ``success`` = the proof is complete (``terminated=True``, ``truncated=False``).
- ``action_is_effective`` = the step reached a new proof state (accepted, not repeated); rejected, timed-out and
  invalid steps leave the state unchanged.
- **Do better than RAGEN:** RAGEN gives +1 to every accepted tactic, so a no-op tactic (``idtac``/``skip``) repeated
  until the step limit out-earns a proof. Here the +1 is paid only when the goals reach a state not seen before in
  the episode; ``reward_repeated_states=True`` restores RAGEN's rule. (Tactics that keep producing fresh states,
  e.g. adding trivial hypotheses, can still earn it, bounded by ``max_steps``.)
- A step after the episode ended (or before any reset) is invalid, reward 0, ``terminated=True``.
- ``info`` also holds ``prover_error`` and ``prover_timeout`` (bools, so a trainer can drop marked trajectories),
  ``accepted_tactics``, ``goals_remaining`` (-1 when unknown), ``steps`` and ``prover_message`` (text, not a metric).

The observation (``render()``) is the theorem, the accepted tactics so far and the current goals as the prover
prints them, plus the last rejected tactic and its error. An invalid action does not change it.

Each ``step`` takes ONE tactic. ``||`` has no meaning to the env: RAGEN's rollout loop already splits a turn's answer
on ``||`` into separate actions, so a turn "intros n || simpl" makes two steps.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import constraint, integer, number

__all__ = [
    "OUTCOME_KINDS",
    "ProverBackend",
    "ProverConfig",
    "StepOutcome",
    "TacticProofEnv",
    "Theorem",
    "check_text",
    "load_theorems",
    "normalize_space",
    "parse_theorem_record",
    "select_theorems",
]

OUTCOME_KINDS = ("accepted", "rejected", "timeout", "invalid", "prover_error")
_MESSAGE_CHARS = 2000


# --------------------------------------------------------------------------------------------- data

@dataclass(frozen=True)
class Theorem:
    """One theorem of an env's set.

    :ivar name: unique name (the declared name for Coq).
    :ivar statement: the declaration the proof starts from (Coq ``Theorem n : P.``; Lean ``theorem n ... := by``).
    :ivar proof: a known proof, one tactic per element (used by the oracle and the tests); may be empty.
    :ivar topic: a short tag (``nat``, ``list``, ``logic``, ``algebra`` ...).
    :ivar header: text the prover needs before the statement (Lean imports); empty for the backend default.
    :ivar informal: an optional natural-language statement shown with the formal one.
    """

    name: str
    statement: str
    proof: tuple[str, ...] = ()
    topic: str = ""
    header: str = ""
    informal: str = ""


def parse_theorem_record(record: dict[str, Any], where: str = "theorem") -> Theorem:
    """A :class:`Theorem` from a JSON record.

    Accepted keys: ``name`` (or ``id``/``problem_id``), ``statement`` (or ``formal_statement``), ``proof`` (a list
    of tactics, or one string with a tactic per line), ``topic``, ``header`` (or ``imports``) and ``informal`` (or
    ``natural_language_statement``). Raises ``ValueError`` naming ``where`` on a malformed record.
    """
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    name = record.get("name", record.get("id", record.get("problem_id")))
    statement = record.get("statement", record.get("formal_statement"))
    if not isinstance(name, (str, int)) or not str(name).strip():
        raise ValueError(f"{where}: a theorem needs a non-empty 'name'")
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError(f"{where}: theorem {name!r} needs a non-empty 'statement'")
    proof = record.get("proof", ())
    if isinstance(proof, str):
        proof = [line.strip() for line in proof.splitlines() if line.strip()]
    if not isinstance(proof, (list, tuple)) or not all(isinstance(t, str) and t.strip() for t in proof):
        raise ValueError(f"{where}: 'proof' of {name!r} must be a list of non-empty tactic strings")
    texts = {}
    for key, alternatives in (("topic", ()), ("header", ("imports",)), ("informal", ("natural_language_statement",))):
        value = record.get(key, next((record[a] for a in alternatives if a in record), ""))
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ValueError(f"{where}: '{key}' of {name!r} must be a string")
        texts[key] = value
    return Theorem(name=str(name).strip(), statement=statement.strip(), proof=tuple(t.strip() for t in proof),
                   **texts)


def load_theorems(path: str | Path) -> tuple[Theorem, ...]:
    """Theorems from a JSONL file (one record per line, see :func:`parse_theorem_record`) or a JSON list.

    Raises ``ValueError`` on a malformed file, an empty set or duplicate names.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    records: list[tuple[str, Any]] = []
    if path.suffix == ".json":
        data = json.loads(text)
        items = data.get("theorems", data) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a list of theorems")
        records = [(f"{path}[{i}]", item) for i, item in enumerate(items)]
    else:
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((f"{path}:{lineno}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not valid JSON: {exc}") from exc
    theorems = tuple(parse_theorem_record(rec, where) for where, rec in records)
    if not theorems:
        raise ValueError(f"{path}: no theorems")
    names = [t.name for t in theorems]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{path}: duplicate theorem names {dupes}")
    return theorems


@dataclass(frozen=True)
class StepOutcome:
    """What a backend reports for one tactic (or for the start of a theorem).

    :ivar kind: one of :data:`OUTCOME_KINDS`.
    :ivar goals: the goals after an accepted tactic, as the prover prints them ("" when none remain).
    :ivar complete: no goal remains and the prover verified the proof.
    :ivar goal_count: number of remaining goals (-1 when unknown).
    :ivar message: the prover's error or warning text (or why the action is invalid).
    :ivar display: how the tactic is shown in the list of tactics so far (the backend's normal form).
    """

    kind: Literal["accepted", "rejected", "timeout", "invalid", "prover_error"]
    goals: str = ""
    complete: bool = False
    goal_count: int = -1
    message: str = ""
    display: str = ""


class ProverBackend(Protocol):
    """What :class:`TacticProofEnv` needs from a prover."""

    def validate(self, action: str) -> tuple[str | None, str]:
        """``(tactic in normal form, "")`` for a well-formed action, else ``(None, reason)``; never raises."""

    def start(self, theorem: Theorem) -> StepOutcome:
        """Begin a proof of ``theorem``: ``accepted`` with the initial goals, or ``prover_error``; never raises."""

    def attempt(self, tactic: str, history: Sequence[str]) -> StepOutcome:
        """Try ``tactic`` (from :meth:`validate`) after the accepted ``history``; never raises."""

    def close(self) -> None:
        """Release processes and connections (the backend can start again later)."""


# --------------------------------------------------------------------------------------------- text helpers

def normalize_space(text: str) -> str:
    """``text`` with every whitespace run collapsed to one space, stripped."""
    return " ".join(text.split())


def check_text(action: Any, max_chars: int, *, allow_newlines: bool) -> tuple[str | None, str]:
    """Common first-pass validation of an action string: ``(text with normalised line ends, "")`` or ``(None, why)``.

    Rejects non-strings, more than ``max_chars`` characters, empty text, and any control, format, surrogate,
    private-use, unassigned or line/paragraph-separator character (tab, CR and LF excepted; LF only when
    ``allow_newlines``). Unicode letters and symbols (``∀``, ``ℕ``, ``→``) are kept.
    """
    if not isinstance(action, str):
        return None, f"an action must be a string, got {type(action).__name__}"
    if len(action) > max_chars:
        return None, f"the action is longer than {max_chars} characters"
    text = action.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    for ch in text:
        if ch == "\n":
            if not allow_newlines:
                return None, "one tactic per action, on one line"
            continue
        category = unicodedata.category(ch)
        if category[0] == "C" or category in ("Zl", "Zp"):
            return None, f"the action contains a control or invisible character (U+{ord(ch):04X})"
    if not text.strip():
        return None, "empty action: send one tactic"
    return text.strip(), ""


def _clip(text: str, limit: int = _MESSAGE_CHARS) -> str:
    text = text.strip()
    suffix = "\n... (truncated)"
    return text if len(text) <= limit else text[: limit - len(suffix)].rstrip() + suffix


# --------------------------------------------------------------------------------------------- config

_theorem_names = constraint("a non-empty list of theorem names", lambda v: isinstance(v, (list, tuple)) and bool(v)
                            and all(isinstance(name, str) and name for name in v))


@attrs.define(kw_only=True)
class ProverConfig:
    """Options shared by the prover envs (rewards follow RAGEN's Lean env; see the module docstring).

    :ivar theorems_path: a JSONL/JSON theorem file; None for the env's built-in set.
    :ivar theorem_names: restrict the episodes to these theorems (None: all).
    :ivar topic: restrict the episodes to one topic ("" for all).
    :ivar max_steps: steps per episode (the trajectory's action limit, ``max_actions_per_traj``).
    :ivar max_action_chars: longer actions are invalid.
    :ivar step_penalty: added to every step.
    :ivar valid_step_reward: added when the prover accepts the tactic (and it reaches a new state).
    :ivar invalid_step_reward: added when the prover rejects the tactic or the action is invalid.
    :ivar success_reward: added when the proof is complete.
    :ivar timeout_penalty: added when the prover times out on the tactic (on top of the rejection).
    :ivar max_steps_penalty: added on the ``max_steps``-th step when the proof is not complete.
    :ivar prover_error_reward: the whole reward of a step on which the prover failed (the episode is truncated).
    :ivar reward_repeated_states: RAGEN's rule, +1 even when the goals return to an already seen state.
    """

    theorems_path: str | None = None
    theorem_names: list[str] | None = attrs.field(default=None, validator=attrs.validators.optional(_theorem_names))
    topic: str = ""
    max_steps: int = attrs.field(default=20, validator=integer(1))
    max_action_chars: int = attrs.field(default=400, validator=integer(1))
    step_penalty: float = attrs.field(default=-0.1, validator=number())
    valid_step_reward: float = attrs.field(default=1.0, validator=number())
    invalid_step_reward: float = attrs.field(default=-1.0, validator=number())
    success_reward: float = attrs.field(default=10.0, validator=number())
    timeout_penalty: float = attrs.field(default=-1.0, validator=number())
    max_steps_penalty: float = attrs.field(default=-2.0, validator=number())
    prover_error_reward: float = attrs.field(default=0.0, validator=number())
    reward_repeated_states: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))


def select_theorems(all_theorems: Sequence[Theorem], cfg: ProverConfig) -> tuple[Theorem, ...]:
    """The theorems an env draws from, after ``theorem_names`` and ``topic``; raises ``ValueError`` when none."""
    chosen = list(all_theorems)
    if cfg.theorem_names is not None:
        by_name = {t.name: t for t in chosen}
        unknown = [n for n in cfg.theorem_names if n not in by_name]
        if unknown:
            raise ValueError(f"theorem_names: unknown theorems {unknown} (known: {', '.join(sorted(by_name))})")
        chosen = [by_name[n] for n in cfg.theorem_names]
    if cfg.topic:
        chosen = [t for t in chosen if t.topic == cfg.topic]
        if not chosen:
            topics = sorted({t.topic for t in all_theorems if t.topic})
            raise ValueError(f"topic: no theorem has topic {cfg.topic!r} (topics: {', '.join(topics)})")
    return tuple(chosen)


# --------------------------------------------------------------------------------------------- env

class TacticProofEnv(TextEnv):
    """The episode logic shared by :class:`~ragen_plugins_envs.prover.coq.CoqEnv` and
    :class:`~ragen_plugins_envs.prover.lean.LeanEnv` (see the module docstring for the rewards).

    A subclass's ``__init__`` calls ``super().__init__`` and then :meth:`_setup` with its backend, its theorems and
    the prover's name.
    """

    config_cls: ClassVar[type] = ProverConfig
    config: ProverConfig

    def _setup(self, backend: ProverBackend, theorems: Iterable[Theorem], prover: str) -> None:
        self.backend = backend
        self.theorems: tuple[Theorem, ...] = tuple(theorems)
        if not self.theorems:
            raise ValueError("a prover env needs at least one theorem")
        self.prover_name = prover
        self.action_names = None
        self.legend = {}
        self.max_actions_per_traj = self.config.max_steps
        self.theorem: Theorem | None = None
        self.tactics: list[str] = []
        self.goals = ""
        self.goal_count = -1
        self.steps = 0
        self._seen: set[str] = set()
        self._last_rejected: tuple[str, str] | None = None
        self._start_error = ""
        self._done = True

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Pick a theorem from the seed (or ``options["theorem"]``: a name or an index) and start its proof."""
        super().reset(seed=seed)
        chosen = (options or {}).get("theorem")
        if isinstance(chosen, str):
            matches = [t for t in self.theorems if t.name == chosen]
            if not matches:
                raise ValueError(f"unknown theorem {chosen!r}")
            self.theorem = matches[0]
        elif isinstance(chosen, int) and not isinstance(chosen, bool):
            self.theorem = self.theorems[chosen % len(self.theorems)]
        else:
            self.theorem = self.theorems[int(self.np_random.integers(len(self.theorems)))]
        self.tactics = []
        self.steps = 0
        self._last_rejected = None
        self._seen = set()
        outcome = self._safe(lambda: self.backend.start(self.theorem))
        if outcome.kind == "accepted":
            self.goals, self.goal_count, self._start_error = outcome.goals, outcome.goal_count, ""
        else:
            self.goals, self.goal_count = "", -1
            self._start_error = outcome.message or "the prover could not start this theorem"
        self._seen.add(self._state_text())
        self._done = False
        info = {"theorem": self.theorem.name, "goals_remaining": self.goal_count,
                "prover_error": bool(self._start_error)}
        if self._start_error:
            info["prover_message"] = self._start_error
        return self.render(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Check one tactic; see the module docstring for the outcomes and rewards."""
        if self._done or self.theorem is None:
            return self.render(), 0.0, True, False, self._info(valid=False, message="the episode is over: reset()")
        cfg = self.config
        self.steps += 1
        if self._start_error:
            outcome = StepOutcome(kind="prover_error", message=self._start_error)
        else:
            tactic, why = self._safe_validate(action)
            if tactic is None:
                outcome = StepOutcome(kind="invalid", message=why)
            else:
                outcome = self._safe(lambda: self.backend.attempt(tactic, tuple(self.tactics)))
                if outcome.kind == "invalid" and not outcome.message:
                    outcome = StepOutcome(kind="invalid", message="not a well-formed tactic")
        reward = cfg.step_penalty
        terminated = truncated = success = effective = False
        valid = outcome.kind != "invalid"
        timeout = outcome.kind == "timeout"
        if outcome.kind == "prover_error":
            reward = cfg.prover_error_reward
            truncated = True
        elif outcome.kind == "accepted":
            self.tactics.append(outcome.display or str(tactic))
            self.goals, self.goal_count = outcome.goals, outcome.goal_count
            self._last_rejected = None
            key = self._state_text()
            effective = key not in self._seen
            self._seen.add(key)
            if effective or cfg.reward_repeated_states:
                reward += cfg.valid_step_reward
            if outcome.complete:
                reward += cfg.success_reward
                terminated = success = True
        else:
            reward += cfg.invalid_step_reward
            if timeout:
                reward += cfg.timeout_penalty
            if valid:
                self._last_rejected = (outcome.display or str(tactic), _clip(outcome.message))
        if not (terminated or truncated) and self.steps >= cfg.max_steps:
            reward += cfg.max_steps_penalty
            truncated = True
        if terminated or truncated:
            self._done = True
        info = self._info(valid=valid, effective=effective, success=success, timeout=timeout,
                          prover_error=outcome.kind == "prover_error", message=outcome.message)
        return self.render(), float(reward), terminated, truncated, info

    def render(self) -> str:
        """The theorem, the tactics so far, the current goals and the last rejected tactic."""
        if self.theorem is None:
            return "No episode yet: call reset()."
        thm = self.theorem
        lines = [f"Theorem to prove ({self.prover_name}):"]
        if thm.informal:
            lines.append(f"Informally: {thm.informal}")
        lines.append(thm.statement)
        lines.append("")
        if self.tactics:
            lines.append(f"Tactics so far ({len(self.tactics)}):")
            lines.extend("  " + t.replace("\n", "\n  ") for t in self.tactics)
        else:
            lines.append("Tactics so far: none")
        lines.append("")
        if self._start_error:
            lines.append("The prover is unavailable:")
            lines.append(_clip(self._start_error))
        else:
            lines.append("Current goals:")
            lines.append(self.goals if self.goals else "No goals remain.")
        if self._last_rejected is not None:
            tactic, message = self._last_rejected
            lines.append("")
            lines.append(f"Last tactic rejected: {tactic}")
            lines.append(message)
        return "\n".join(lines)

    def oracle_action(self) -> str | None:
        """The next tactic of the theorem's known proof while the accepted tactics follow it, else None."""
        if self._done or self.theorem is None or self._start_error:
            return None
        proof = self.theorem.proof
        n = len(self.tactics)
        if n >= len(proof):
            return None
        done = [normalize_space(t) for t in self.tactics]
        if done != [normalize_space(self._display(t)) for t in proof[:n]]:
            return None
        return proof[n]

    def state_key(self) -> str:
        """The theorem's name and the current goals (equal for identical proof states)."""
        if self.theorem is None:
            return ""
        return f"{self.theorem.name}\n{self._state_text()}"

    def close(self) -> None:
        """Stop the prover process / connection (the env can still be reset later)."""
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
        super().close()

    # ------------------------------------------------------------------------------------------ helpers

    def _display(self, tactic: str) -> str:
        norm, _why = self._safe_validate(tactic)
        return norm if norm is not None else tactic

    def _state_text(self) -> str:
        return normalize_space(self.goals) if self.goals else ("<no goals>" if not self._start_error else "<error>")

    def _safe_validate(self, action: Any) -> tuple[str | None, str]:
        try:
            return self.backend.validate(action)
        except Exception as exc:  # noqa: BLE001 - a step never raises
            return None, f"the action could not be checked: {type(exc).__name__}: {exc}"

    @staticmethod
    def _safe(call: Any) -> StepOutcome:
        try:
            outcome = call()
        except Exception as exc:  # noqa: BLE001 - backends report errors, but a step must never raise
            return StepOutcome(kind="prover_error", message=f"prover backend failed: {type(exc).__name__}: {exc}")
        if not isinstance(outcome, StepOutcome) or outcome.kind not in OUTCOME_KINDS:
            return StepOutcome(kind="prover_error", message=f"prover backend returned {outcome!r:.200}")
        return outcome

    def _info(self, *, valid: bool, effective: bool = False, success: bool = False, timeout: bool = False,
              prover_error: bool = False, message: str = "") -> dict[str, Any]:
        return {
            "success": bool(success),
            "action_is_valid": bool(valid),
            "action_is_effective": bool(effective),
            "prover_error": bool(prover_error),
            "prover_timeout": bool(timeout),
            "accepted_tactics": len(self.tactics),
            "goals_remaining": int(self.goal_count),
            "steps": int(self.steps),
            "prover_message": _clip(message) if message else "",
        }
