"""The trajectory sample of a run (``samples.jsonl``, written by the trainer: ``run.trajectory_samples`` best, worst
and random trajectories per step) read for the report's trajectory viewer, bounded so that a long run still makes
a page of reasonable size.

One JSON object per line (``step``, ``pick``, ``env``, ``group_id``, ``seed``, ``episode_id``, ``success``,
``reward``, ``score``, ``env_error``, ``turns``: each with ``observation``, ``response``, ``reasoning``, ``answer``,
``actions``, ``reward``, ``format_penalty``, ``format_ok``, ``truncated``, ``info``). A step's records are written
together, ``best`` then ``worst`` then ``random``; a resumed run may write a step again: a later write of a step
(after another step, after an unreadable line, or when the picks start over) replaces the earlier one. Lines that
are not JSON objects with an integer ``step`` (a killed run's torn last line) are skipped and counted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs

__all__ = ["CUT", "MAX_BYTES", "MAX_PER_PICK", "MAX_STEPS", "MAX_TEXT", "MAX_TURNS", "Samples", "read_samples",
           "thin"]

#: bounds of what the page embeds: steps (evenly spaced, with the last), characters per text field, trajectories
#: per pick and step, turns per trajectory, and about how many bytes of JSON in all (fewer steps when over)
MAX_STEPS, MAX_TEXT, MAX_PER_PICK, MAX_TURNS, MAX_BYTES = 200, 4000, 10, 50, 20_000_000
#: the mark at the end of a cut text
CUT = "… (cut)"
_MAX_ACTIONS = 50
_PICK_ORDER = {"best": 0, "worst": 1, "random": 2}


@attrs.define
class Samples:
    """What the viewer shows: the normalised records of the embedded steps, and what was left out."""

    present: bool = False
    steps: dict[int, list[dict[str, Any]]] = attrs.Factory(dict)
    recorded: int = 0  # steps in the file
    skipped: int = 0  # unreadable lines
    cut: int = 0  # texts cut to max_text
    left_out: int = 0  # trajectories beyond MAX_PER_PICK per pick and step, turns and actions beyond theirs
    max_steps: int = MAX_STEPS
    max_text: int = MAX_TEXT

    def notes(self) -> list[str]:
        """Plain lines on what the page leaves out."""
        notes = []
        if len(self.steps) < self.recorded:
            notes.append(f"Steps thinned: {len(self.steps)} of the {self.recorded} sampled steps are shown, evenly "
                         f"spaced, with the last (the page embeds at most {self.max_steps} steps' samples and about "
                         f"{MAX_BYTES // 1_000_000} MB).")
        if self.skipped:
            notes.append(f"{self.skipped} line(s) of samples.jsonl were not readable and were skipped (a killed run "
                         "can leave a torn last line).")
        if self.cut:
            notes.append(f"{self.cut} text(s) longer than {self.max_text} characters are cut (marked “{CUT}”).")
        if self.left_out:
            notes.append(f"{self.left_out} trajectories, turns or actions are left out (at most {MAX_PER_PICK} "
                         f"trajectories of each pick per step, {MAX_TURNS} turns per trajectory, {_MAX_ACTIONS} "
                         "actions per turn).")
        return notes

    def embedded(self) -> dict[str, Any]:
        """The data the page embeds: ``{"steps": [{"step": N, "records": [...]}, ...]}`` in step order."""
        return {"steps": [{"step": step, "records": records} for step, records in sorted(self.steps.items())]}


def thin(steps: list[int], limit: int) -> list[int]:
    """At most ``limit`` of ``steps`` (sorted): evenly spaced, the first and the last always among them."""
    if len(steps) <= limit:
        return list(steps)
    if limit <= 1:
        return steps[-1:]
    return sorted({steps[round(i * (len(steps) - 1) / (limit - 1))] for i in range(limit)})


def _parse(line: bytes) -> dict[str, Any] | None:
    """A record, or None when the line is not a JSON object with an integer ``step``."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return record if isinstance(step, int) and not isinstance(step, bool) else None


def _index(path: Path) -> tuple[dict[int, list[int]], int]:
    """The byte offsets of the lines of each step's latest write, and the number of unreadable lines."""
    blocks: dict[int, list[int]] = {}
    skipped, offset = 0, 0
    previous: tuple[int, int] | None = None  # (step, pick order) of the previous readable line
    with path.open("rb") as fh:
        for line in fh:
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            record = _parse(line)
            if record is None:
                skipped, previous = skipped + 1, None
                continue
            step, order = record["step"], _PICK_ORDER.get(str(record.get("pick")), 0)
            if previous is None or previous[0] != step or order < previous[1]:
                blocks[step] = []  # a (new) write of this step: it replaces an earlier one
            blocks[step].append(start)
            previous = (step, order)
    return blocks, skipped


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


@attrs.define
class _Normaliser:
    """Records in a fixed shape (the viewer's script never meets an unexpected type; no NaN, which JSON lacks),
    their texts cut to ``max_text`` characters; counts what it cut and left out."""

    max_text: int
    cut: int = 0
    left_out: int = 0

    def text(self, value: Any, limit: int | None = None) -> str:
        if value is None:
            return ""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        limit = self.max_text if limit is None else limit
        if len(text) > limit:
            self.cut += 1
            return text[:limit] + CUT
        return text

    def scalar(self, value: Any) -> int | float | str | None:
        if isinstance(value, int) and not isinstance(value, bool):
            return value if abs(value) < 2**53 else str(value)
        return _number(value) if isinstance(value, float) else (None if value is None else self.text(value, 200))

    def turn(self, turn: Any) -> dict[str, Any]:
        turn = turn if isinstance(turn, dict) else {"response": turn}
        actions = turn.get("actions")
        actions = actions if isinstance(actions, list) else [] if actions is None else [actions]
        if len(actions) > _MAX_ACTIONS:
            self.left_out += len(actions) - _MAX_ACTIONS
        info = turn.get("info")
        return {"observation": self.text(turn.get("observation")), "response": self.text(turn.get("response")),
                "reasoning": self.text(turn.get("reasoning")), "answer": self.text(turn.get("answer")),
                "actions": [self.text(a, 500) for a in actions[:_MAX_ACTIONS]], "reward": _number(turn.get("reward")),
                "format_penalty": _number(turn.get("format_penalty")), "format_ok": _flag(turn.get("format_ok")),
                "truncated": _flag(turn.get("truncated")), "info": self.text(info) if info not in (None, {}) else ""}

    def record(self, record: dict[str, Any]) -> dict[str, Any]:
        turns = record.get("turns")
        turns = turns if isinstance(turns, list) else []
        if len(turns) > MAX_TURNS:
            self.left_out += len(turns) - MAX_TURNS
        error = record.get("env_error")
        return {"step": record["step"], "pick": self.text(record.get("pick"), 40) or "?",
                "env": self.text(record.get("env"), 200) or "?", "group_id": self.scalar(record.get("group_id")),
                "seed": self.scalar(record.get("seed")), "episode_id": self.scalar(record.get("episode_id")),
                "success": _flag(record.get("success")), "reward": _number(record.get("reward")),
                "score": _number(record.get("score")), "env_error": None if error is None else self.text(error),
                "turns": [self.turn(t) for t in turns[:MAX_TURNS]], "turns_total": len(turns)}

    def step(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A step's records, at most :data:`MAX_PER_PICK` of each pick."""
        kept: list[dict[str, Any]] = []
        per_pick: dict[str, int] = {}
        for record in records:
            pick = str(record.get("pick"))
            per_pick[pick] = per_pick.get(pick, 0) + 1
            if per_pick[pick] > MAX_PER_PICK:
                self.left_out += 1
            else:
                kept.append(self.record(record))
        return kept


def read_samples(run_dir: str | Path, max_steps: int = MAX_STEPS, max_text: int = MAX_TEXT,
                 max_bytes: int = MAX_BYTES) -> Samples:
    """The run's ``samples.jsonl`` for the viewer: at most ``max_steps`` steps (evenly spaced, with the last;
    fewer when their JSON would pass about ``max_bytes``), texts cut to ``max_text`` characters; an empty
    :class:`Samples` (``present`` False) when the file is absent."""
    path = Path(run_dir) / "samples.jsonl"
    if not path.is_file():
        return Samples(max_steps=max_steps, max_text=max_text)
    blocks, skipped = _index(path)
    chosen = thin(sorted(blocks), max_steps)
    norm = _Normaliser(max_text)
    steps = {}
    with path.open("rb") as fh:
        for step in chosen:
            records = []
            for offset in blocks[step]:
                fh.seek(offset)
                if (record := _parse(fh.readline())) is not None:
                    records.append(record)
            if records:  # none when the file changed under us (a live run): the step is left out
                steps[step] = norm.step(records)
    chosen = [step for step in chosen if step in steps]
    sizes = {step: len(json.dumps(records)) for step, records in steps.items()}
    while len(chosen) > 1 and sum(sizes[s] for s in chosen) > max_bytes:
        chosen = thin(chosen, len(chosen) // 2)
    return Samples(True, {s: steps[s] for s in chosen}, len(blocks), skipped, norm.cut, norm.left_out, max_steps,
                   max_text)
