"""What a sandbox run is given and what it reports: function-call tests, program results, test outcomes.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs


class ExecStatus(str, enum.Enum):
    """How one program run ended."""

    OK = "ok"  #: exited with status 0
    TIMEOUT = "timeout"  #: wall-clock or CPU limit
    MEMORY = "memory"  #: MemoryError / allocation failure under the address-space limit
    RUNTIME_ERROR = "runtime_error"  #: non-zero exit (an uncaught exception, ``sys.exit(1)``...)
    KILLED = "killed"  #: ended by a signal it did not survive (segfault, kill...), or the sandbox itself failed
    OUTPUT_LIMIT = "output_limit"  #: more than ``max_output_bytes`` of output, the file-size or file-count limit


@attrs.frozen
class ExecResult:
    """One program run.

    :ivar status: how it ended.
    :ivar stdout: its standard output (UTF-8, undecodable bytes replaced), at most ``max_output_bytes``.
    :ivar stderr: the tail of its standard error (at most 4 KiB), or what went wrong.
    :ivar wall_s: wall-clock seconds of the run.
    :ivar returncode: exit status, negative signal number, or None when it was killed on a limit.
    """

    status: ExecStatus
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is ExecStatus.OK


@attrs.frozen
class CallTest:
    """A function-call test: ``entry(*args)`` must equal ``expected`` (compared by the supervisor).

    Equality: tuples count as lists, floats match within 1e-6 (relative or absolute), and when ``expected`` is a
    one-element list the bare element also matches (the TACO/PrimeIntellect convention).
    """

    args: tuple[Any, ...]
    expected: Any


@attrs.frozen
class CodeTest:
    """A test written as trusted Python code calling ``candidate`` (e.g. one assertion of a HumanEval ``check``).

    :ivar source: statements run in the supervisor's test namespace (never in the program's process).
    :ivar counted: whether it is a test (False: setup, such as ``import math``, whose failure is not scored).
    """

    source: str
    counted: bool = True


@attrs.frozen
class TestOutcome:
    """The result of one counted test."""

    __test__ = False  # not a pytest class

    passed: bool
    status: ExecStatus
    detail: str = ""
    wall_s: float = 0.0


@attrs.frozen
class FunctionTestReport:
    """The outcomes of a function-call test run, in test order (counted tests only)."""

    outcomes: tuple[TestOutcome, ...]
    load_error: str = ""
    wall_s: float = 0.0

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)
