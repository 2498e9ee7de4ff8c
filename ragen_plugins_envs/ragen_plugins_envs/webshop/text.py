"""Text matching used by WebShop's reward: colour normalisation, fuzzy token-set ratio, noun extraction.

- :func:`normalize_color` — WebShop's ``normalize_color``: the first word of its colour list found inside the
  value (``"black forest"`` → ``"black"``, ``"violet lavender"`` → ``"lavender"``), else the value unchanged.
  WebShop applies it to *every* option value (sizes and flavours too), and so does this module.
- :func:`token_set_ratio` — the fuzzy score WebShop takes from ``thefuzz`` (backed by ``rapidfuzz``): both strings
  are processed (non-ASCII dropped, lower-cased, non-alphanumerics turned into spaces), split into token sets, and
  the best Indel similarity among "intersection vs intersection+rest" combinations is returned, rounded to an int.
  Implemented here with a bit-parallel LCS, no dependency.
- :func:`noun_tokens` — WebShop keeps the spaCy ``NOUN``/``PROPN`` tokens of product titles to score the product
  type. spaCy (and its 600 MB model) is not used here: nouns are approximated by the lower-cased alphabetic tokens
  of two or more letters that are neither function words nor common product-title modifiers (adjectives,
  participles, marketing words). Product titles are mostly noun phrases, so the approximation keeps what matters:
  the brand and the type words.
"""

from __future__ import annotations

import functools
import re

__all__ = ["COLOR_SET", "full_process", "indel_ratio", "noun_tokens", "normalize_color", "token_set_ratio"]

#: WebShop's colour vocabulary, in its order (the first one contained in a value wins)
COLOR_SET: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass",
    "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light",
    "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow",
    "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white",
    "wine", "yellow",
)


@functools.lru_cache(maxsize=65536)
def normalize_color(value: str) -> str:
    """The first colour word of :data:`COLOR_SET` contained in ``value``, or ``value`` itself."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def full_process(text: str) -> str:
    """``thefuzz``'s default processing: ASCII only, non-alphanumerics → spaces, lower case, trimmed."""
    ascii_only = text.encode("ascii", "ignore").decode("ascii")
    return _NON_ALNUM.sub(" ", ascii_only).lower().strip()


def _lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence (Hyyrö's bit-parallel algorithm)."""
    if not a or not b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for ch in b:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def indel_ratio(a: str, b: str) -> float:
    """Normalised Indel similarity in [0, 100] (``rapidfuzz.fuzz.ratio``): 200·LCS / (len(a) + len(b))."""
    total = len(a) + len(b)
    if total == 0:
        return 100.0
    return 200.0 * _lcs_length(a, b) / total


@functools.lru_cache(maxsize=65536)
def token_set_ratio(a: str, b: str) -> int:
    """Fuzzy token-set similarity of two strings in 0..100 (``thefuzz.fuzz.token_set_ratio``)."""
    tokens_a = set(full_process(a).split())
    tokens_b = set(full_process(b).split())
    if not tokens_a or not tokens_b:
        return 0
    common = tokens_a & tokens_b
    only_a = tokens_a - tokens_b
    only_b = tokens_b - tokens_a
    if common and (not only_a or not only_b):
        return 100
    sect = " ".join(sorted(common))
    rest_a = " ".join(sorted(only_a))
    rest_b = " ".join(sorted(only_b))
    combined_a = f"{sect} {rest_a}".strip()
    combined_b = f"{sect} {rest_b}".strip()
    scores = [indel_ratio(combined_a, combined_b)]
    if sect:
        scores.append(indel_ratio(sect, combined_a))
        scores.append(indel_ratio(sect, combined_b))
    return round(max(scores))


# function words (not nouns)
_FUNCTION_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each either every few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my neither no nor not now of off on once only or other
our ours out over own per same she should so some such than that the their theirs them then there these they this
those through to too under until up upon very via was we were what when where which while who whom why will with
within without would you your yours
""".split())

# common modifiers of product titles that spaCy would not tag as nouns
_TITLE_MODIFIERS = frozenset("""
adjustable advanced all-in-one anti assorted authentic automatic available basic best better big bright classic clean
comfortable compact compatible complete cool cordless cute deep deluxe dual durable easy elegant electric essential
excellent extra fast fine flexible fresh full funny gentle genuine good great heavy high home hot ideal improved
indoor instant large latest light lightweight little long low luxury magnetic mini modern multi multiple natural
new nice non old original outdoor perfect personal plus portable powerful premium professional pure quick quiet real
regular reusable rich safe sensitive short simple single slim small smart soft solid special sturdy super thick thin
tiny top total true ultra unique universal upgraded useful versatile vintage waterproof wide wireless
""".split())


@functools.lru_cache(maxsize=65536)
def noun_tokens(title: str) -> tuple[str, ...]:
    """Approximate noun tokens of a product title (see the module docstring); duplicates kept, in order."""
    words = re.findall(r"[a-z]+", title.lower())
    return tuple(w for w in words if len(w) >= 2 and w not in _FUNCTION_WORDS and w not in _TITLE_MODIFIERS)
