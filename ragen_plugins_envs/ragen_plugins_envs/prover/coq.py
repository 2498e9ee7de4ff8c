"""Coq theorem proving, one tactic per step, checked by a real ``coqtop`` (Debian's ``coq`` package, Coq 8.16).

**How Coq is driven.** Each env owns one persistent ``coqtop -q -emacs`` process (started at the first reset, kept
across episodes, killed by ``close()`` or when the env is garbage-collected; about 0.6 s to start and 240 MB
resident with the default preamble, 60 MB with an empty one, so size parallel env counts accordingly). In
``-emacs`` mode coqtop ends every answer with a prompt ``<prompt>NAME < STATE |NAME| 0 < </prompt>`` whose state
number is the document state; the session sends exactly one sentence and reads up to the next prompt. A new
episode goes back to the state after the preamble (``BackTo``) and states the theorem. A tactic is sent as
``Timeout T 1: <tactic> .``:

- the goal selector ``1:`` (or the selector the action gives: ``all:``, ``2:``, ``[x]:``, ``par:``, ``!:``) makes
  Coq parse the rest as a tactic only, so no vernacular command (``Qed``, ``Admitted``, ``Abort``, ``Require``,
  ``Drop``, ``Redirect`` ...) can run;
- ``Timeout T`` (``tactic_timeout``, 5 s) bounds the tactic inside Coq (reported as ``Error: Timeout!``); a coqtop
  that does not answer within ``T + hard_timeout_grace`` seconds is killed, restarted and the proof so far replayed;
- the process runs under an address-space limit (``memory_limit_mb``, 2 GiB) so a term blow-up fails inside Coq
  (``Out of memory``/``Stack overflow``) or kills only coqtop (restarted, the tactic counts as rejected);
- a rejected action leaves the state unchanged: Coq itself does not change state on an error, and when an action
  was several sentences (a bullet and a tactic) and a later one fails, the session ``BackTo``-s the state before it;
- when Coq prints ``No more goals.`` the session runs ``Qed.``: the kernel re-checks the whole proof term, which
  catches e.g. an ill-guarded ``fix`` or goals given up with ``admit``. Only then is the proof complete; if Qed
  fails, the tactic is rolled back and counts as rejected. With ``check_assumptions`` the session also runs
  ``Print Assumptions`` and requires "Closed under the global context" (no axiom). It is off by default because
  it is redundant with the default preamble (``Arith``, ``Lia`` and ``List`` declare no axiom, and tactics cannot
  declare one) and slow (about 1 s per proof that used ``lia``, which makes Coq fetch opaque proofs from disk);
  turn it on when the preamble loads a library with axioms (``Classical``, ``FunctionalExtensionality`` ...).

**Actions** (after whitespace is collapsed; see :meth:`CoqBackend.parse`): one tactic sentence, the final ``.``
optional, e.g. ``intros n.``, ``induction n as [|n IH].``, ``simpl; rewrite IH; reflexivity``; optionally preceded
by a bullet (``-``, ``+``, ``*``, repeated) or ``{``, or the lone ``}``. Invalid (reward as documented in
:mod:`~ragen_plugins_envs.prover.common`, state unchanged): empty; longer than ``max_action_chars``; control or
invisible characters; double quotes or comments (``"``, ``(*``, ``*)``: they could hide the end of the sentence);
more than one sentence (a ``.`` followed by a blank inside the action: chain tactics with ``;`` instead); a
capitalised first word (a vernacular command such as ``Qed.``, ``Admitted.``, ``Abort.``, ``Require``, ``Drop.``,
``Undo``, ``Print``, ``Unshelve``); the cheats ``admit``, ``give_up``; ``native_compute``/``native_cast_no_check``
(would compile and load native code); and any action Coq answers with a syntax or lexer error. Other errors
(unknown names, failed unification, no such goal ...) reject the tactic.

The built-in set (:data:`THEOREMS_PATH`, 42 theorems on naturals, booleans, lists and propositional logic, each
with a known flat proof) is loaded with the preamble ``Require Import Arith Lia List. Import ListNotations.``
The oracle proposes the next tactic of the known proof.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ragen_core.validators import constraint, integer, number
from ragen_plugins_envs.prover.common import (
    ProverConfig,
    StepOutcome,
    TacticProofEnv,
    Theorem,
    check_text,
    load_theorems,
    normalize_space,
    select_theorems,
)

__all__ = [
    "DEFAULT_PREAMBLE",
    "THEOREMS_PATH",
    "CoqBackend",
    "CoqConfig",
    "CoqEnv",
    "CoqError",
    "CoqReply",
    "CoqSession",
    "builtin_theorems",
    "clean_output",
    "coq_version",
    "count_goals",
]

#: the built-in theorem set (JSONL: name, statement, proof, topic)
THEOREMS_PATH = Path(__file__).with_name("theorems_coq.jsonl")
#: sentences run once when coqtop starts
DEFAULT_PREAMBLE = ("Require Import Arith Lia List.", "Import ListNotations.")

_PROMPT = re.compile(
    r"<prompt>(?P<name>[^<>|]*?) < (?P<state>\d+) \|(?P<proofs>[^<>|]*)\| (?P<depth>\d+) < </prompt>\s*\Z")
_GOAL_HEADER = re.compile(
    r"^(\d+ (focused )?goals?\b|No more goals|This subproof is complete|All the remaining goals|"
    r"There are unfocused goals)")
_GOAL_COUNT = re.compile(r"^(\d+) (?:focused )?goals?\b", re.M)
_ID = re.compile(r" \(ID \d+\)")
_WARNING = re.compile(r"<warning>(.*?)</warning>", re.S)
_TAG = re.compile(r"</?(infomsg|warning)>")
_SELECTOR = re.compile(
    r"^(all|par|!|\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*|\[\s*[A-Za-z_][A-Za-z0-9_']*\s*\])\s*:(?!=)\s*")
_FOCUS = re.compile(r"^(-+|\++|\*+|\{)(?=\s|$|[^-+*{])\s*")
_FORBIDDEN = re.compile(r"(?<![\w'])(admit|give_up|native_compute|native_cast_no_check)(?![\w'])")
_FIRST_WORD = re.compile(r"[^\W\d][\w'.]*")
_MAX_OUTPUT = 1 << 20
_KEEP = 1 << 16


class CoqError(RuntimeError):
    """coqtop could not be started, died, or did not answer in time (the session is dead afterwards)."""


@dataclass(frozen=True)
class CoqReply:
    """coqtop's answer to one sentence: the text before the prompt and the prompt's fields."""

    text: str
    state: int
    name: str
    in_proof: bool
    error: bool

    @property
    def error_message(self) -> str:
        """The ``Error: ...`` part of the text (without the echoed input and caret lines)."""
        lines = self.text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Error:"):
                first = line[len("Error:"):].strip()
                return "\n".join([first, *lines[i + 1:]]).strip()
        return self.text.strip()


@functools.lru_cache(maxsize=8)
def coq_version(coqtop: str = "coqtop") -> str:
    """``coqtop -print-version`` (e.g. ``8.16.1``), or "" when coqtop is missing."""
    path = shutil.which(coqtop)
    if path is None:
        return ""
    try:
        out = subprocess.run([path, "-print-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.split()[0] if out.stdout.split() else ""


class CoqSession:
    """One ``coqtop -q -emacs`` process: send a sentence, read the answer up to the next prompt.

    :param coqtop: the executable (name on ``PATH`` or a path).
    :param preamble: sentences run right after start (their failure raises :class:`CoqError`).
    :param memory_limit_mb: address-space limit of the process (0: none; set with ``prlimit`` on Linux).
    """

    def __init__(self, coqtop: str = "coqtop", preamble: Sequence[str] = DEFAULT_PREAMBLE,
                 memory_limit_mb: int = 2048, start_timeout: float = 60.0) -> None:
        self.coqtop = coqtop
        self.preamble = tuple(preamble)
        self.memory_limit_mb = memory_limit_mb
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.state = 0
        self.base_state = 0
        self.in_proof = False
        self.starts = 0
        self._finalizer: Any = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """(Re)start coqtop and run the preamble; raises :class:`CoqError` when that fails."""
        self.kill()
        path = shutil.which(self.coqtop)
        if path is None:
            raise CoqError(f"coqtop not found ({self.coqtop!r}): install Coq, e.g. `apt-get install -y coq`")
        try:
            self.proc = subprocess.Popen(
                [path, "-q", "-emacs"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                bufsize=0, start_new_session=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
        except OSError as exc:
            raise CoqError(f"could not start coqtop ({path}): {exc}") from exc
        self.starts += 1
        self._finalizer = weakref.finalize(self, _kill_group, self.proc)
        if self.memory_limit_mb and hasattr(resource, "prlimit"):  # set from outside: no preexec_fn with threads
            limit = self.memory_limit_mb << 20
            try:
                resource.prlimit(self.proc.pid, resource.RLIMIT_AS, (limit, limit))
            except (OSError, ValueError) as exc:
                self.kill()
                raise CoqError(f"could not limit coqtop's memory to {self.memory_limit_mb} MiB: {exc}") from exc
        reply = self._read(self.start_timeout)
        self.state, self.in_proof = reply.state, reply.in_proof
        for sentence in self.preamble:
            reply = self.send(sentence, self.start_timeout)
            if reply.error:
                self.kill()
                raise CoqError(f"the preamble sentence {sentence!r} failed: {reply.error_message}")
        self.base_state = self.state

    def send(self, sentence: str, timeout: float) -> CoqReply:
        """Send one sentence (no newline inside) and read the answer; raises :class:`CoqError` (session killed)
        when coqtop dies or stays silent for ``timeout`` seconds."""
        if not self.alive or self.proc is None or self.proc.stdin is None:
            raise CoqError("coqtop is not running")
        before = self.state
        try:
            self.proc.stdin.write(sentence.replace("\n", " ").encode("utf-8") + b"\n")
        except OSError as exc:
            self.kill()
            raise CoqError(f"coqtop closed its input: {exc}") from exc
        reply = self._read(timeout)
        error = reply.state == before or any(line.startswith("Error:") for line in reply.text.splitlines())
        self.state, self.in_proof = reply.state, reply.in_proof
        return CoqReply(reply.text, reply.state, reply.name, reply.in_proof, error)

    def back_to(self, state: int, timeout: float) -> bool:
        """Return the document to ``state`` (a state on the current branch); False when Coq refused."""
        if self.state == state:
            return True
        reply = self.send(f"BackTo {state}.", timeout)
        return self.state == state and not any(line.startswith("Error:") for line in reply.text.splitlines())

    def kill(self) -> None:
        """Kill the process group (idempotent)."""
        proc, self.proc = self.proc, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            _kill_group(proc)

    def _read(self, timeout: float) -> CoqReply:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        data = bytearray()
        dropped = 0
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise CoqError(f"coqtop did not answer within {timeout:.0f} s")
            ready, _w, _x = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.kill()
                last = bytes(data[-500:]).decode("utf-8", "replace").strip()
                raise CoqError("coqtop exited" + (f" after printing: {last}" if last else ""))
            data += chunk
            if len(data) > _MAX_OUTPUT:  # a tactic flooding the output: keep its beginning and the end
                dropped += len(data) - 2 * _KEEP
                data = data[:_KEEP] + data[-_KEEP:]
            match = _PROMPT.search(bytes(data[-400:]).decode("utf-8", "replace"))
            if match is None:
                continue
            text = bytes(data).decode("utf-8", "replace")
            body = text[:text.rfind("<prompt>")]
            if dropped:
                body = f"({dropped} bytes of output dropped)\n" + body
            return CoqReply(body, int(match.group("state")), match.group("name").strip(),
                            bool(match.group("proofs").strip()), False)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def clean_output(text: str) -> tuple[str, str]:
    """Split coqtop's answer to a successful tactic into ``(goals display, messages)``.

    Warnings and anything printed before the goal display (``info_auto`` traces, ``idtac``) become the messages;
    ``(ID n)`` annotations are dropped so displays do not depend on Coq's internal counters.
    """
    warnings = [w.strip() for w in _WARNING.findall(text)]
    text = _WARNING.sub("", text)
    text = _ID.sub("", _TAG.sub("", text))
    lines = [line.rstrip() for line in text.splitlines()]
    start = next((i for i, line in enumerate(lines) if _GOAL_HEADER.match(line)), None)
    before = lines[:start] if start is not None else lines
    goals = lines[start:] if start is not None else []
    display = re.sub(r"\n{3,}", "\n\n", "\n".join(goals)).strip("\n")
    messages = "\n".join([*warnings, *(line for line in before if line.strip())]).strip()
    return display, messages


def count_goals(display: str) -> int:
    """Goals in a display: the ``N goals`` header, 0 for ``No more goals.``, -1 when unknown."""
    if any(line.strip() == "No more goals." for line in display.splitlines()):
        return 0
    match = _GOAL_COUNT.search(display)
    return int(match.group(1)) if match else -1


_memory_limit = constraint("0 (no limit) or an integer >= 256", lambda v: isinstance(v, int)
                           and not isinstance(v, bool) and (v == 0 or v >= 256))


@attrs.define(kw_only=True)
class CoqConfig(ProverConfig):
    """Options of :class:`CoqEnv` (the reward and theorem options are those of :class:`ProverConfig`).

    :ivar coqtop: the coqtop executable.
    :ivar tactic_timeout: Coq's ``Timeout`` per tactic, in whole seconds.
    :ivar hard_timeout_grace: seconds past ``tactic_timeout`` before a silent coqtop is killed and restarted.
    :ivar memory_limit_mb: address-space limit of coqtop (0: none).
    :ivar preamble: sentences run when coqtop starts (None: ``Require Import Arith Lia List. Import ListNotations.``).
    :ivar check_assumptions: a complete proof must also be closed under the global context (no axioms; see the
        module docstring for why this is off by default).
    """

    coqtop: str = "coqtop"
    tactic_timeout: int = attrs.field(default=5, validator=integer(1, 3600))
    hard_timeout_grace: float = attrs.field(default=5.0, validator=number(0, 3600, low_open=True))
    memory_limit_mb: int = attrs.field(default=2048, validator=_memory_limit)
    preamble: list[str] | None = None
    check_assumptions: bool = False


@dataclass(frozen=True)
class _Parsed:
    sentences: tuple[str, ...]
    display: str


class CoqBackend:
    """The :class:`~ragen_plugins_envs.prover.common.ProverBackend` over a :class:`CoqSession`."""

    def __init__(self, config: CoqConfig) -> None:
        self.config = config
        preamble = DEFAULT_PREAMBLE if config.preamble is None else tuple(config.preamble)
        self.session = CoqSession(config.coqtop, preamble, config.memory_limit_mb)
        self.theorem: Theorem | None = None
        self._script: list[str] = []  # sentences accepted since the statement, for replay after a restart

    # ------------------------------------------------------------------------------------------ parsing

    def parse(self, action: Any) -> _Parsed | str:
        """The sentences to send for ``action`` and its display form, or why it is invalid."""
        cfg = self.config
        text, why = check_text(action, cfg.max_action_chars, allow_newlines=True)
        if text is None:
            return why
        text = normalize_space(text)
        if '"' in text or "(*" in text or "*)" in text:
            return "strings and comments are not allowed in a tactic"
        if "prompt>" in text.lower():
            return "the action contains a reserved word"
        if re.fullmatch(r"\}\s*\.?", text):
            return _Parsed(("}",), "}")
        focus = ""
        match = _FOCUS.match(text)
        if match:
            focus = match.group(1)
            text = text[match.end():]
        if not text or text == ".":
            if not focus:
                return "empty action: send one tactic"
            return _Parsed((focus,), focus)
        body = text[:-1].rstrip() if text.endswith(".") else text
        if not body:
            return "empty tactic"
        if re.search(r"\.(\s|$)", body):
            return "one tactic per action: a '.' followed by a blank ends a sentence (chain tactics with ';')"
        selector = "1:"
        tail = body
        sel = _SELECTOR.match(body)
        if sel:
            selector = normalize_space(body[:sel.end()]).replace(" :", ":")
            tail = body[sel.end():]
            if not tail.strip():
                return "a goal selector needs a tactic after it"
        word = _FIRST_WORD.match(tail)
        if word and word.group(0)[0].isupper():
            return (f"{word.group(0).split('.')[0]!r} starts a vernacular command, not a tactic: only tactics are "
                    "allowed (the env runs Qed itself when no goal remains)")
        if (forbidden := _FORBIDDEN.search(body)) is not None:
            name = forbidden.group(1)
            why = "it would fake a proof" if name in ("admit", "give_up") else "it compiles and loads native code"
            return f"{name!r} is not allowed ({why})"
        timeout = cfg.tactic_timeout
        sentences = ((focus,) if focus else ()) + (f"Timeout {timeout} {selector} {tail} .",)
        display = (focus + " " if focus else "") + body + "."
        return _Parsed(sentences, display)

    def validate(self, action: str) -> tuple[str | None, str]:
        parsed = self.parse(action)
        if isinstance(parsed, str):
            return None, parsed
        return parsed.display, ""

    # ------------------------------------------------------------------------------------------ proving

    @property
    def _timeout(self) -> float:
        return self.config.tactic_timeout + self.config.hard_timeout_grace

    def start(self, theorem: Theorem) -> StepOutcome:
        self.theorem = theorem
        self._script = []
        statement = theorem.statement.strip()
        if not statement.endswith(".") or re.search(r"\.(\s|$)", statement[:-1]) or "(*" in statement:
            return StepOutcome(kind="prover_error", message=f"the statement of {theorem.name!r} must be one Coq "
                               "sentence ending with '.' (e.g. 'Theorem name : P.'), without comments")
        try:
            if not self.session.alive or not self.session.back_to(self.session.base_state, self._timeout):
                self.session.start()
            reply = self.session.send(theorem.statement, self._timeout)
        except CoqError as exc:
            return StepOutcome(kind="prover_error", message=f"coqtop: {exc}")
        if reply.error or not reply.in_proof:
            return StepOutcome(kind="prover_error",
                               message=f"Coq rejected the theorem statement {theorem.name!r}: {reply.error_message}")
        display = self._goals(reply)
        return StepOutcome(kind="accepted", goals=display, goal_count=count_goals(display))

    def attempt(self, tactic: str, history: Sequence[str]) -> StepOutcome:
        parsed = self.parse(tactic)
        if isinstance(parsed, str):
            return StepOutcome(kind="invalid", message=parsed)
        if self.theorem is None:
            return StepOutcome(kind="prover_error", message="no theorem was started")
        try:
            if not self.session.alive or not self.session.in_proof:
                self._replay()
            return self._attempt(parsed)
        except CoqError as exc:
            try:
                self._replay()
            except CoqError as again:
                return StepOutcome(kind="prover_error", message=f"coqtop failed and could not restart: {again}",
                                   display=parsed.display)
            return StepOutcome(kind="timeout" if "did not answer" in str(exc) else "rejected",
                               message=f"coqtop: {exc} (restarted; the proof so far was replayed)",
                               display=parsed.display)

    def _attempt(self, parsed: _Parsed) -> StepOutcome:
        session = self.session
        before = session.state
        reply: CoqReply | None = None
        for sentence in parsed.sentences:
            reply = session.send(sentence, self._timeout)
            if reply.error:
                self._restore(before)
                message = reply.error_message
                if message.startswith("Timeout!"):
                    return StepOutcome(kind="timeout", message=f"Coq timed out after {self.config.tactic_timeout} s",
                                       display=parsed.display)
                if re.search(r"Syntax [Ee]rror|Lexer|Undefined token", message):
                    return StepOutcome(kind="invalid", message=f"Coq could not parse the tactic: {message}",
                                       display=parsed.display)
                return StepOutcome(kind="rejected", message=message, display=parsed.display)
        assert reply is not None
        display = self._goals(reply)
        messages = clean_output(reply.text)[1]
        goal_count = count_goals(display)
        if goal_count == 0 and any(line.strip() == "No more goals." for line in display.splitlines()):
            verdict = self._verify(before)
            if verdict:
                return StepOutcome(kind="rejected", message=verdict, display=parsed.display)
            return StepOutcome(kind="accepted", goals="", complete=True, goal_count=0, message=messages,
                               display=parsed.display)
        self._script.extend(parsed.sentences)
        return StepOutcome(kind="accepted", goals=display, goal_count=goal_count, message=messages,
                           display=parsed.display)

    def _goals(self, reply: CoqReply) -> str:
        """The goal display of a successful sentence; coqtop skips it after a tactic that printed messages (idtac,
        info_auto) and after a ``BackTo``, so then it is asked for with ``Show.``."""
        display = clean_output(reply.text)[0]
        if not display:
            shown = self.session.send("Show.", self._timeout)
            if not shown.error:
                display = clean_output(shown.text)[0]
        return display

    def _verify(self, before: int) -> str:
        """Run ``Qed`` (and ``Print Assumptions``); "" when the proof is accepted, else why (state restored)."""
        assert self.theorem is not None
        session = self.session
        qed = session.send("Qed.", self._timeout + 60)
        if qed.error:
            self._restore(before)
            return f"the goals are closed but Coq rejected the proof at Qed: {qed.error_message}"
        if self.config.check_assumptions:
            name = self._declared_name()
            check = session.send(f"Print Assumptions {name}.", self._timeout)
            if check.error or "Closed under the global context" not in check.text:
                self._restore(before)
                return f"the proof depends on axioms: {check.error_message or check.text.strip()}"
        return ""

    def _declared_name(self) -> str:
        assert self.theorem is not None
        match = re.match(r"\s*(?:Theorem|Lemma|Fact|Remark|Corollary|Proposition|Example|Goal)\s+([\w'.]+)",
                         self.theorem.statement)
        return match.group(1) if match else self.theorem.name

    def _restore(self, state: int) -> None:
        if not self.session.back_to(state, self._timeout):
            self._replay()

    def _replay(self) -> None:
        """Restart coqtop and replay the statement and the accepted sentences (raises :class:`CoqError`)."""
        assert self.theorem is not None
        session = self.session
        session.start()
        reply = session.send(self.theorem.statement, self._timeout)
        if reply.error:
            raise CoqError(f"the statement failed on replay: {reply.error_message}")
        for sentence in self._script:
            reply = session.send(sentence, self._timeout)
            if reply.error:
                raise CoqError(f"replaying {sentence!r} failed: {reply.error_message}")

    def close(self) -> None:
        self.session.kill()


@functools.lru_cache(maxsize=4)
def builtin_theorems(path: str = str(THEOREMS_PATH)) -> tuple[Theorem, ...]:
    """The theorems of a Coq theorem file (default: the built-in set), cached by path."""
    return load_theorems(path)


class CoqEnv(TacticProofEnv):
    """Prove Coq theorems tactic by tactic against a real coqtop (see the module docstring)."""

    config_cls: ClassVar[type] = CoqConfig
    config: CoqConfig

    def __init__(self, config: CoqConfig | None = None, render_mode: str | None = "ansi", **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        theorems = select_theorems(builtin_theorems(cfg.theorems_path or str(THEOREMS_PATH)), cfg)
        version = coq_version(cfg.coqtop)
        prover = f"Coq {version}" if version else "Coq"
        self._setup(CoqBackend(cfg), theorems, prover)
        self.instruction = (
            f"You are proving a theorem in {prover} with tactics, one tactic per action, e.g. "
            "<answer>intros n.</answer>, then <answer>induction n as [|n IH].</answer>, <answer>simpl.</answer>, "
            "<answer>rewrite IH.</answer>, <answer>reflexivity.</answer>. Chain tactics with ';' inside one action. "
            "The state shows the theorem, your accepted tactics and the current goals. Only tactics are allowed "
            "(no Qed/Admitted/Require or other commands, no admit). An accepted tactic that reaches a new proof "
            f"state earns {cfg.valid_step_reward:g}, a rejected one {cfg.invalid_step_reward:g} (nothing changes), "
            f"each step costs {-cfg.step_penalty:g}, and completing the proof earns {cfg.success_reward:g} more."
        )
