"""Terminal text ("ansi" renders) into plain text that keeps the grid layout and what the colours meant.

gymnasium's toy-text envs show part of their state only in colour: FrozenLake highlights the player's tile in red,
Taxi highlights the taxi and colours the passenger's stop and the destination. Stripping the escapes alone would
lose that, so :func:`ansi_to_text` reads each character's style (SGR attributes such as ``bg:red``, ``fg:blue``,
``bold``) and applies :class:`Mark` rules:

- a mark with a ``symbol`` replaces each character it covers by that symbol, in place (one character for one, so
  the layout is kept): FrozenLake's ``bg:red`` tile becomes ``P``;
- a mark without a symbol keeps the characters and adds a note line under the grid, ``"<meaning>: <characters>"``
  (Taxi's ``fg:magenta`` stop gives ``destination: Y``);
- a mark with neither (:data:`IGNORE`) drops the attribute silently (Taxi's ``bold``);
- a styled run no mark covers gets a generic note, ``red background: 'S' at line 2, column 1``.

Every other escape sequence (cursor moves, OSC titles) and control character except the newline and the tab is
removed; trailing spaces of each line and leading and trailing blank lines are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import attrs

__all__ = ["IGNORE", "Mark", "ansi_to_text", "describe_style", "styled_lines"]

#: a CSI sequence (``ESC [ params final``), an OSC sequence (``ESC ] ... BEL|ESC \``) or another two-byte escape
_ESCAPE = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
#: control characters that are dropped (the newline and the tab are kept)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

_COLOURS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
#: SGR codes that turn one attribute on
_ON = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 5: "blink", 7: "reverse", 9: "strike"}
#: SGR codes that turn attributes off (``22``: bold and dim; ``39``/``49``: the default colours)
_OFF = {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 25: ("blink",), 27: ("reverse",),
        29: ("strike",)}


@attrs.frozen
class Mark:
    """What one style attribute means in a game's render.

    :ivar meaning: shown in the legend (with a ``symbol``) or as the label of a note line (without one).
    :ivar symbol: the character that replaces each covered character, or None to keep them and add a note.
    """

    meaning: str = ""
    symbol: str | None = attrs.field(default=None, validator=attrs.validators.optional(
        attrs.validators.and_(attrs.validators.instance_of(str), attrs.validators.min_len(1),
                              attrs.validators.max_len(1))))


#: a mark that drops its attribute without a trace (e.g. the ``bold`` that comes with a colour)
IGNORE = Mark()

Style = frozenset[str]


def _colour(kind: str, code: int) -> str:
    """``fg:red`` / ``bg:bright-red`` for the 8 basic (30-37, 40-47) and 8 bright (90-97, 100-107) colours."""
    base = {"fg": 30, "bg": 40}[kind]
    bright = code >= base + 60
    return f"{kind}:{'bright-' if bright else ''}{_COLOURS[code - base - (60 if bright else 0)]}"


def _extended(kind: str, codes: list[int], i: int) -> tuple[str, int]:
    """The ``38;5;N`` / ``38;2;R;G;B`` (or ``48;...``) colour whose ``38`` is ``codes[i]``; gymnasium's ``colorize``
    writes a bare ``38`` (``48`` highlighted) for its "crimson". Returns the attribute and the index after it."""
    if i + 2 < len(codes) and codes[i + 1] == 5:
        return f"{kind}:colour{codes[i + 2]}", i + 3
    if i + 4 < len(codes) and codes[i + 1] == 2:
        r, g, b = codes[i + 2:i + 5]
        return f"{kind}:#{r % 256:02x}{g % 256:02x}{b % 256:02x}", i + 5
    return f"{kind}:crimson", i + 1


def _apply_sgr(style: set[str], params: str) -> None:
    """Update ``style`` in place with one SGR sequence's parameters (``"41"``, ``"34;1"``, ``""`` = reset)."""
    codes = [int(p) if p.isdigit() else 0 for p in (params.replace(":", ";").split(";") if params else ["0"])]
    i = 0
    while i < len(codes):
        code = codes[i]
        i += 1
        if code == 0:
            style.clear()
        elif code in _ON:
            style.add(_ON[code])
        elif code in _OFF:
            style.difference_update(_OFF[code])
        else:
            i = _apply_colour(style, codes, i, code)


#: (kind, first normal colour, first bright colour): foreground 30-37/90-97 (38 extended, 39 default), background
#: the same plus 10
_COLOUR_KINDS = (("fg", 30, 90), ("bg", 40, 100))


def _apply_colour(style: set[str], codes: list[int], i: int, code: int) -> int:
    """Apply colour code ``code`` (read just before index ``i``) to ``style``; returns the index after its
    arguments. Codes that set no colour change nothing."""
    for kind, normal, bright in _COLOUR_KINDS:
        if normal <= code <= normal + 7 or bright <= code <= bright + 7 or code in (normal + 8, normal + 9):
            style.difference_update({a for a in style if a.startswith(f"{kind}:")})
            if code == normal + 8:
                attr, i = _extended(kind, codes, i - 1)
                style.add(attr)
            elif code != normal + 9:
                style.add(_colour(kind, code))
    return i


def styled_lines(raw: str) -> list[list[tuple[str, Style]]]:
    """Split terminal text into lines of ``(character, style)``; escapes and control characters are consumed.

    A ``\\r\\n`` counts as one newline; a lone carriage return is dropped like any other control character.
    """
    lines: list[list[tuple[str, Style]]] = [[]]
    style: set[str] = set()
    pos = 0
    text = raw.replace("\r\n", "\n")
    for match in _ESCAPE.finditer(text):
        _add_plain(lines, text[pos:match.start()], frozenset(style))
        if match.group(2) == "m":
            _apply_sgr(style, match.group(1) or "")
        pos = match.end()
    _add_plain(lines, text[pos:], frozenset(style))
    return lines


def _add_plain(lines: list[list[tuple[str, Style]]], chunk: str, style: Style) -> None:
    for ch in _CONTROL.sub("", chunk):
        if ch == "\n":
            lines.append([])
        else:
            lines[-1].append((ch, style))


def describe_style(style: Style) -> str:
    """Words for a style: ``frozenset({"bg:red"})`` -> ``"red background"``; ``{"fg:blue", "bold"}`` -> ``"bold blue
    text"``."""
    words = sorted(a for a in style if ":" not in a)
    fg = next((a.split(":", 1)[1] for a in style if a.startswith("fg:")), None)
    bg = next((a.split(":", 1)[1] for a in style if a.startswith("bg:")), None)
    parts = [" ".join([*words, fg, "text"]) if fg else " ".join(words)] if fg or words else []
    if bg:
        parts.append(f"{bg} background")
    return " on ".join(p for p in parts if p)


def _runs(line: list[tuple[str, Style]]) -> Iterator[tuple[int, str, Style]]:
    """Maximal runs of equally styled characters: ``(first column, text, style)`` (columns from 1)."""
    start = 0
    for i in range(1, len(line) + 1):
        if i == len(line) or line[i][1] != line[start][1]:
            yield start + 1, "".join(ch for ch, _ in line[start:i]), line[start][1]
            start = i


def _trim(lines: list[list[tuple[str, Style]]]) -> list[list[tuple[str, Style]]]:
    """Drop leading and trailing blank lines (unstyled spaces only)."""
    def blank(line: list[tuple[str, Style]]) -> bool:
        return all(ch.isspace() and not style for ch, style in line)

    first = next((i for i, line in enumerate(lines) if not blank(line)), len(lines))
    last = next((i for i in range(len(lines) - 1, -1, -1) if not blank(lines[i])), -1)
    return lines[first:last + 1]


def ansi_to_text(raw: str, marks: Mapping[str, Mark] | None = None) -> str:
    """Plain text of an "ansi" render (see the module docstring): the layout kept, marked characters replaced in
    place, note lines for marks without a symbol and for styled runs no mark covers."""
    marks = marks or {}
    lines = _trim(styled_lines(raw))
    out: list[str] = []
    notes: dict[str, list[str]] = {}
    for number, line in enumerate(lines, start=1):
        text: list[str] = []
        for column, run, style in _runs(line):
            known = [marks[a] for a in sorted(style) if a in marks]
            symbol = next((m.symbol for m in known if m.symbol), None)
            text.append(symbol * len(run) if symbol else run)
            for mark in known:
                if mark.symbol is None and mark.meaning:
                    notes.setdefault(mark.meaning, []).append(run.strip() or repr(run))
            rest = frozenset(a for a in style if a not in marks)
            if rest and not symbol and (run.strip() or any(a.startswith("bg:") or a == "reverse" for a in rest)):
                notes.setdefault(describe_style(rest), []).append(f"{run!r} at line {number}, column {column}")
        out.append("".join(text).rstrip())
    out += [f"{label}: {', '.join(dict.fromkeys(items))}" for label, items in notes.items()]
    return "\n".join(out)
