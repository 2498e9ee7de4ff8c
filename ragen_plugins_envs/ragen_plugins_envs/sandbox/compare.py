"""Comparing a program's stdout with the expected output (on the host: expected outputs never enter the sandbox).

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import math
import re

_FLOAT_TOLERANCE = 1e-6


def _normal_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _token_float(token: str) -> float | None:
    if len(token) > 64 or not re.fullmatch(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def outputs_match(actual: str, expected: str) -> bool:
    """Whether a program's stdout matches the expected output.

    Lines are compared after removing trailing whitespace and leading/trailing blank lines (``\\r\\n`` counts as
    ``\\n``). Failing that, the whitespace-separated tokens must match one to one, where two numeric tokens also match
    when they are within 1e-6 (absolute or relative) of each other.
    """
    if not isinstance(actual, str) or not isinstance(expected, str):
        return False
    if _normal_lines(actual) == _normal_lines(expected):
        return True
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        fa, fb = _token_float(a), _token_float(b)
        if fa is None or fb is None or not math.isclose(fa, fb, rel_tol=_FLOAT_TOLERANCE, abs_tol=_FLOAT_TOLERANCE):
            return False
    return True
