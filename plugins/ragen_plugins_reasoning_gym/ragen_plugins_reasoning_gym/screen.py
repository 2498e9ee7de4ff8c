"""The answer screen: model text that some reasoning-gym scorers would execute is refused before it reaches them.

ragen never runs model output as code, but a few of reasoning-gym's own ``score_answer`` functions do (checked
against reasoning-gym 0.1.25):

- :data:`PYTHON_EVAL` pass the answer to Python's ``eval`` when it is not the reference verbatim (to accept a
  Python list written instead of the asked format): ``__import__('os').system(...)`` would run;
- :data:`ARITHMETIC` and :data:`SYMBOLIC` parse it with sympy's ``parse_expr``, which builds Python code from the
  text and ``eval``\\ s it: the same text would run there too, and ``9**9**9**9`` would never finish.

:func:`refusal` reads the answer with Python's own parser (:mod:`ast`, which executes nothing) and refuses it (says
why) unless it is data of the shape the scorer expects: for ``eval``, a literal (numbers, strings, names, lists and
tuples of them: no call, attribute, operator or subscript), or text ``eval`` cannot parse at all (the scorer's
``eval`` then fails the same way, harmlessly); for sympy, an arithmetic expression over numbers (and, for the
symbolic datasets, names and a few maths functions) whose powers have small exponents. Every other dataset scores
the text without executing it and is not screened (only the env's length cap applies).

The screen is conservative: a refused answer may be one the scorer would have scored (``1 + 2 = 3``, ``x!``), but a
model gets the asked format right without it.
"""

from __future__ import annotations

import ast
import re

__all__ = ["ARITHMETIC", "MAX_EXPRESSION_CHARS", "PYTHON_EVAL", "SCREENED", "SYMBOLIC", "refusal"]

#: datasets whose scorer calls ``eval(answer)`` (as a fallback after an exact comparison)
PYTHON_EVAL = frozenset({"binary_matrix", "n_queens", "spiral_matrix", "string_insertion"})
#: datasets whose scorer evaluates the answer with ``sympy.parse_expr`` as a number (numbers and + - * / only)
ARITHMETIC = frozenset({"countdown", "puzzle24"})
#: datasets whose scorer parses the answer with ``sympy.parse_expr`` as a formula (symbols and functions)
SYMBOLIC = frozenset({"intermediate_integration", "polynomial_multiplication", "simple_integration"})
#: every screened dataset
SCREENED = PYTHON_EVAL | ARITHMETIC | SYMBOLIC

#: the longest answer the sympy datasets accept (their answers are formulas of a few dozen characters)
MAX_EXPRESSION_CHARS = 500
#: the most AST nodes, and the deepest nesting of function calls, of a formula
_MAX_NODES, _MAX_CALL_DEPTH = 400, 3
#: the largest absolute value of a number in an exponent
_MAX_EXPONENT = 100

#: the maths functions a formula may call (sympy's names; anything else named is a symbol, never called)
FUNCTIONS = frozenset({"sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "acot", "sinh", "cosh",
                       "tanh", "asinh", "acosh", "atanh", "exp", "log", "ln", "sqrt", "Abs", "abs"})

_FORMULA_CHARS = re.compile(r"[A-Za-z0-9\s+\-*/^().,]*")
_LITERAL_NODES = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.List, ast.Tuple, ast.UnaryOp, ast.USub,
                  ast.UAdd)
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)


def refusal(dataset: str, answer: str) -> str | None:
    """Why ``answer`` must not reach the scorer of reasoning-gym dataset ``dataset``, or None when it may.

    :param dataset: the dataset whose ``score_answer`` will read the answer (for a composite's entry, the
        entry's own ``source_dataset``).
    :param answer: the model's answer text.
    """
    if dataset in PYTHON_EVAL:
        return _literal_refusal(answer)
    if dataset in ARITHMETIC:
        return _formula_refusal(answer, symbols=False)
    if dataset in SYMBOLIC:
        return _formula_refusal(answer, symbols=True)
    return None


def _literal_refusal(answer: str) -> str | None:
    """None when ``eval`` of the answer (as given or stripped) can only fail or build a literal."""
    for text in {answer, answer.strip()}:
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError):
            continue  # eval raises the same error: the scorer's fallback fails harmlessly
        except Exception as exc:  # noqa: BLE001 - a parser crash (RecursionError, MemoryError) is refused
            return f"the answer could not be checked as Python data ({type(exc).__name__})"
        bad = next((node for node in ast.walk(tree) if not isinstance(node, _LITERAL_NODES)), None)
        if bad is not None:
            return (f"the answer is Python code ({type(bad).__name__}), which this dataset's scorer would run "
                    "with eval; only plain data (numbers, strings, lists) is scored that way")
    return None


def _formula_refusal(answer: str, *, symbols: bool) -> str | None:
    """None when the answer is a small arithmetic formula sympy can evaluate without running anything else."""
    what = "a formula" if symbols else "an arithmetic expression over numbers"
    text = answer.strip()
    if len(text) > MAX_EXPRESSION_CHARS:
        return f"the answer is longer than {MAX_EXPRESSION_CHARS} characters, too long for {what}"
    if not _FORMULA_CHARS.fullmatch(text):
        return (f"the answer is not {what}: only letters, digits, spaces and + - * / ^ ( ) . , are read "
                "(this dataset's scorer evaluates the text with sympy)")
    try:
        tree = ast.parse(text.replace("^", "**"), mode="eval")
    except Exception:  # noqa: BLE001 - anything Python cannot parse is refused, whatever the parser raised
        return f"the answer is not {what} (it does not parse)"
    nodes = list(ast.walk(tree))
    if len(nodes) > _MAX_NODES:
        return f"the answer is not {what}: more than {_MAX_NODES} parts"
    for node in nodes:
        problem = _node_problem(node, symbols)
        if problem:
            return f"the answer is not {what}: {problem}"
    if _call_depth(tree.body) > _MAX_CALL_DEPTH:
        return f"the answer is not {what}: functions nested more than {_MAX_CALL_DEPTH} deep"
    return None


def _node_problem(node: ast.AST, symbols: bool) -> str | None:
    """What is wrong with one node of a formula (None: nothing)."""
    if isinstance(node, (ast.Expression, ast.Load, ast.BinOp, ast.UnaryOp)) or isinstance(node, _OPERATORS):
        return _power_problem(node) if isinstance(node, ast.BinOp) else None
    if isinstance(node, ast.Constant):
        ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        return None if ok else f"the literal {node.value!r} is not a number"
    if isinstance(node, ast.Name):
        return None if symbols else f"the name {node.id!r} is not a number"
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if not symbols:
            return "functions are not allowed"
        if name not in FUNCTIONS or node.keywords:
            return f"only these functions may be called: {', '.join(sorted(FUNCTIONS))}"
        return None
    if isinstance(node, ast.operator):
        return "only + - * / and powers are allowed"
    return f"{type(node).__name__} is not allowed"


def _power_problem(node: ast.BinOp) -> str | None:
    """A power must have a small exponent without powers in it, and a base without powers in it."""
    if not isinstance(node.op, ast.Pow):
        return None
    for part, where in ((node.right, "exponent"), (node.left, "base")):
        for inner in ast.walk(part):
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Pow):
                return f"a power in the {where} of a power"
    for inner in ast.walk(node.right):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, (int, float)) and abs(inner.value) > _MAX_EXPONENT:
            return f"an exponent above {_MAX_EXPONENT}"
    return None


def _call_depth(node: ast.AST) -> int:
    """How deeply function calls nest in ``node``."""
    below = max((_call_depth(child) for child in ast.iter_child_nodes(node)), default=0)
    return below + 1 if isinstance(node, ast.Call) else below
