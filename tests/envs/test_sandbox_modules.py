"""The sandbox-side modules (``sandbox/supervisor.py``, ``sandbox/child.py``) as ordinary code: importing them runs
nothing, the host passes their exact text, and the supervisor's result comparison and code check are unit-tested
here (the end-to-end behaviour is in test_sandbox.py)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile

import hypothesis.strategies as st
from hypothesis import given

from ragen_plugins_envs.sandbox import child, supervisor
from ragen_plugins_envs.sandbox.jobs import sandbox_side_source


def test_importing_the_sandbox_side_modules_runs_nothing() -> None:
    code = ("import sys; import ragen_plugins_envs.sandbox.supervisor, ragen_plugins_envs.sandbox.child;"
            "print('imported')")
    out = subprocess.run([sys.executable, "-c", code], input="", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "imported\n", out.stderr  # main() would read stdin and print JSON


def test_the_host_runs_the_modules_own_text() -> None:
    with open(supervisor.__file__, encoding="utf-8") as fh:
        assert sandbox_side_source("supervisor.py") == fh.read()
    with open(child.__file__, encoding="utf-8") as fh:
        assert sandbox_side_source("child.py") == fh.read()
    compile(sandbox_side_source("supervisor.py"), "supervisor.py", "exec")  # what `python -c` will compile


def test_the_child_answers_calls_over_its_fds() -> None:
    """The child's protocol outside any sandbox, on a harmless program of ours: ready, one call, one error."""
    import marshal
    import struct

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "solution.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("def add(a, b):\n    return a + b\n")
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", "-c", sandbox_side_source("child.py"), path, "add", ""],
                                close_fds=False, preexec_fn=lambda: (os.dup2(req_r, 3), os.dup2(resp_w, 4)))
        os.close(req_r), os.close(resp_w)

        def reply() -> tuple:
            n = struct.unpack(">I", os.read(resp_r, 4))[0]
            return marshal.loads(os.read(resp_r, n))

        def call(*args: object) -> None:
            data = marshal.dumps((args, {}))
            os.write(req_w, struct.pack(">I", len(data)) + data)

        assert reply() == ("ready", None)
        call(2, 3)
        assert reply() == ("ok", 5)
        call(2, "x")
        tag, text = reply()
        assert tag == "error" and text.startswith("TypeError")
        os.close(req_w)
        assert proc.wait(timeout=30) == 0


def test_code_objects_are_found_anywhere_in_a_result() -> None:
    code = (lambda: 0).__code__
    assert supervisor._holds_code(code)
    assert supervisor._holds_code({"a": [1, (2, frozenset({code}))]})
    assert supervisor._holds_code({code: 1})
    assert not supervisor._holds_code({"a": [1, (2.5, "s", None, b"x")]})


values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                      max_leaves=12)


@given(values)
def test_a_value_matches_itself_and_its_tuple_form(value: object) -> None:
    assert supervisor._matches(value, value)
    as_tuples = value if not isinstance(value, list) else tuple(value)
    assert supervisor._matches(as_tuples, value)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_floats_match_within_a_relative_tolerance(x: float) -> None:
    assert supervisor._matches(x + 1e-9 * max(1.0, abs(x)), x)
    assert not supervisor._matches(x + 1e-3 * max(1.0, abs(x)), x)
    assert not supervisor._matches(True, 1) and not supervisor._matches(1, True)  # bools are not numbers here
    assert supervisor._matches(3, [3])  # a one-element expected list also accepts the bare value
    assert not math.isnan(x)
