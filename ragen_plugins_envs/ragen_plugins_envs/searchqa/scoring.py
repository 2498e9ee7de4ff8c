"""Answer scoring: SQuAD normalisation, exact match, token F1 and the SearchQA reward.

- :func:`normalize_answer` — SQuAD's official normalisation: lower-case; remove punctuation (every character of
  ``string.punctuation``); remove the articles ``a``, ``an``, ``the`` as whole words; collapse whitespace.
- :func:`exact_match` — the normalised strings are equal.
- :func:`f1_score` — HotpotQA's token F1 on normalised, whitespace-split tokens (multiset overlap: precision =
  common / predicted tokens, recall = common / gold tokens, F1 their harmonic mean; 0 without overlap). As in
  HotpotQA's evaluator, when either side normalises to ``yes``, ``no`` or ``noanswer`` and the two differ, F1 is 0.
- :func:`answer_reward` — RAGEN's SearchQA reward against one or more gold answers (the best gold counts): exact
  match → 1.0; otherwise the F1 when it is at least ``f1_threshold`` (0.3); else 0.0. Success = exact match.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

__all__ = ["F1_THRESHOLD", "answer_reward", "exact_match", "f1_score", "normalize_answer"]

#: F1 below this earns nothing (RAGEN's ``f1_threshold``)
F1_THRESHOLD = 0.3
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, no punctuation, no articles, single spaces."""
    if not isinstance(text, str):
        return ""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> bool:
    """True when the normalised strings are equal."""
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    """HotpotQA's token F1 between normalised answers (see the module docstring)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    special = ("yes", "no", "noanswer")
    if (pred in special or ref in special) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def answer_reward(prediction: str, golds: Iterable[str] | str,
                  f1_threshold: float = F1_THRESHOLD) -> tuple[float, bool, float]:
    """``(reward, exact, best_f1)`` of ``prediction`` against the gold answer(s) (rule in the module docstring)."""
    golds = [golds] if isinstance(golds, str) else list(golds)
    exact = any(exact_match(prediction, g) for g in golds)
    best_f1 = max((f1_score(prediction, g) for g in golds), default=0.0)
    if exact:
        return 1.0, True, 1.0
    return (best_f1 if best_f1 >= f1_threshold else 0.0), False, best_f1
