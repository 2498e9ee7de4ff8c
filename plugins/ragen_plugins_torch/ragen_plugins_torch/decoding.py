"""The sampling loop behind :class:`~ragen_plugins_torch.policy.HFPolicy`, and its store of key/value caches keyed by
token prefix.

**The loop** (:func:`decode`) does what Hugging Face's ``generate`` does for a decoder-only model, the same way, and so
samples the same tokens from the same random state: each step runs the model on the last token of every row (its
logits in float32), applies the request's temperature, top-k and top-p with transformers' own warpers in
``generate``'s order, draws with ``torch.multinomial`` over the whole batch (a finished row still draws, so every
row consumes the generator as in ``generate``, then gets the pad token), and stops when every row has produced its
end token, a stop string or ``max_new_tokens``. What it leaves out is the machinery a sampler for RL does not need:
no per-step rebuilding of model kwargs, no tensor-only stop-string matcher (a row's text is scanned after each token,
see :class:`StopScan`), no logits processors that the request did not ask for. The sampler is exactly the request's
settings: a model's own ``generation_config`` defaults (Qwen's ``top_k: 20`` or ``repetition_penalty``) are not
applied, so the distribution sampled is the one whose log-probs the trainer computes.

**The store** (:class:`PrefixStore`): after a call, each row's cache (its prompt and all but its last sampled token)
is kept under that token sequence. A later prompt that starts with a stored sequence continues from its cache and
runs only its new tokens through the model: in the ``full`` context mode a turn's prompt is the previous turn's
prompt, its response, the turn's closing, the next observation and the generation prompt, so a trajectory's prefill
grows with its new tokens instead of with the square of its length; in ``ragen serve`` a chat's next request
continues its previous one. Entries are dropped when the model's weights change (any parameter's in-place version
counter moves: an optimiser step, a loaded state dict), least recently used first beyond the byte budget, and when a
longer entry continues them.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import attrs
import torch
import torch.nn.functional as F

__all__ = ["DecodeOutput", "PrefixStore", "StopScan", "decode", "logits_warpers", "num_threads"]


@contextlib.contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` inside the block (left alone for None or when already ``n``)."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def logits_warpers(temperature: float, top_k: int | None, top_p: float) -> list[Any]:
    """transformers' warpers for these settings, in ``generate``'s order (temperature, top-k, top-p), each only
    where ``generate`` adds it (temperature not 1, top-k set and not 0, top-p under 1)."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    out: list[Any] = []
    if temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_k:
        out.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    return out


class StopScan:
    """Where each row's response ends: at the end token, or at the first token after which the text decoded so far
    (tokens decoded one at a time, ``decode([t])``, cached per id) holds a stop string in its last ``len(s) + 32``
    characters. A stop string first appears only after a token whose text holds its last character, so only those
    tokens are checked. Equal to :func:`ragen_plugins_torch.policy._length_reference` token by token."""

    def __init__(self, tokenizer: Any, eos: int | None, stop: tuple[str, ...], pieces: dict[int, str],
                 rows: int) -> None:
        self.decode, self.eos, self.stop, self.pieces = tokenizer.decode, eos, stop, pieces
        self.texts = [""] * rows

    def ends(self, row: int, token: int) -> bool:
        """Whether ``token``, the next token of ``row``, ends its response."""
        if token == self.eos:
            return True
        if not self.stop:
            return False
        piece = self.pieces.get(token)
        if piece is None:
            piece = self.pieces[token] = self.decode([token], skip_special_tokens=False)
        text = self.texts[row] = self.texts[row] + piece
        return any(not s or (s[-1] in piece and s in text[-(len(s) + 32):]) for s in self.stop)


@attrs.define
class DecodeOutput:
    """What :func:`decode` sampled: ``tokens`` ``[B, T]`` (pad after a row's end), each sampled token's log-prob and
    its step's entropy ``[B, T]`` (0 after a row's end), each row's response ``lengths`` (end token or stop string
    included), and the ``cache`` and attention ``mask`` after the last step (the prompt and every fed token: all but
    the last)."""

    tokens: torch.Tensor
    logprobs: torch.Tensor
    entropies: torch.Tensor
    lengths: list[int]
    cache: Any
    mask: torch.Tensor


def decode(model: Any, last: torch.Tensor, mask: torch.Tensor, cache: Any, *, max_new_tokens: int, greedy: bool,
           warpers: list[Any], scan: StopScan, pad_id: int, temperature: float = 1.0, in_place: bool = True,
           step_threads: int | None = None, cache_rows: torch.Tensor | None = None) -> DecodeOutput:
    """Sample up to ``max_new_tokens`` tokens per row, starting from ``last`` (``[B, 1]``: each prompt's last token)
    with ``cache`` holding the rest of the prompt (None: ``last`` is the whole prompt, ``[B, L]``) under the attention
    ``mask`` (``[B, cached + last's width]``, 0 at padding). Positions are the mask's running count, as in
    ``generate``. Log-probs and entropies are those of the raw logits at ``temperature`` (the distribution before
    top-k and top-p), taken at each step for the rows still inside their response, so no step's logits outlive it
    (``generate`` keeps all of them: ``[B, V]`` per step).

    Sampling is ``torch.multinomial``'s own method for one sample: ``argmax(p / q)`` with ``q`` drawn by
    ``exponential_`` over the whole ``[B, V]`` batch (the same tokens from the same generator state, tested). That
    draw is serial, one number at a time, and the largest single cost of a step for a small model, so
    :class:`_Noise` makes the next step's ``q`` in a second thread while the model runs the next forward pass
    (nothing else draws from the generator meanwhile; it is drawn only once the loop knows that step will run).

    With ``in_place`` the steps run through :class:`~ragen_plugins_torch.decode_step.DecodeStep` where the model
    allows it (the same logits, keys and values written in place into buffers sized for the call; see that module),
    otherwise through the forward; until a model's first in-place step has been checked against its forward (the
    first call), that call's first step runs through the forward and the check is made on its second.
    ``step_threads``: torch's intra-op threads for the steps after the first (None: unchanged). ``cache_rows``:
    the ``cache`` row each of ``last``'s rows continues (``[B]``; requests sharing a prompt share a cache row), None:
    row for row."""
    rows, tokens, scored = last.shape[0], [], []
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)[:, -last.shape[1]:]
    feed, finished = last, torch.zeros(rows, dtype=torch.bool, device=last.device)
    alive, lengths = list(range(rows)), [0] * rows
    runner = _first_runner(model, mask, cache, cache_rows, max_new_tokens if in_place else 0)
    with _Noise(None if greedy else rows) as noise, contextlib.ExitStack() as later_steps:
        for t in range(max_new_tokens):
            step = runner.step(feed, positions)[:, -1, :].to(dtype=torch.float32, copy=True)
            scores = step
            for warp in warpers:
                scores = warp(None, scores)
            nxt = torch.argmax(scores, dim=-1) if greedy else noise.sample(torch.softmax(scores, dim=-1))
            if len(alive) < rows:
                nxt = nxt.masked_fill(finished, pad_id)
            tokens.append(nxt)
            scored.append(_score(step, nxt, None if len(alive) == rows else alive, temperature))
            ids = nxt.tolist()
            ended = [i for i in alive if scan.ends(i, ids[i])]
            for i in ended:
                lengths[i] = t + 1
                finished[i] = True
            if ended:
                alive = [i for i in alive if not finished[i]]
            if not alive or t + 1 == max_new_tokens:
                break
            noise.prepare(step)  # the next step's draw, made while its forward pass runs
            feed = nxt[:, None]
            positions = positions[:, -1:] + 1
            runner = runner.grow(max_new_tokens - t - 1, in_place)
            if t == 0:
                later_steps.enter_context(num_threads(step_threads))
    for i in alive:
        lengths[i] = len(tokens)
    logp, ent = _scores(scored, rows, last.device)
    return DecodeOutput(torch.stack(tokens, 1) if tokens else last.new_zeros((rows, 0)), logp, ent, lengths,
                        runner.cache, runner.mask)


def _scores(scored: list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]], rows: int, device: Any
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each step's log-probs and entropies (:func:`_score`, for the rows it scored) as ``[rows, steps]``, 0 where a
    row had ended."""
    logp = torch.zeros((rows, len(scored)), dtype=torch.float32, device=device)
    ent = torch.zeros_like(logp)
    for t, (idx, chosen, h) in enumerate(scored):
        if idx is None:
            logp[:, t], ent[:, t] = chosen, h
        else:
            logp[idx, t], ent[idx, t] = chosen, h
    return logp, ent


def _first_runner(model: Any, mask: torch.Tensor, cache: Any, rows: torch.Tensor | None, steps: int
                  ) -> _Forward | _InPlace:
    """The runner of a call's first step: in place over buffers for ``steps`` steps (gathering ``rows`` of
    ``cache`` straight into them) for a model whose in-place step has passed its check, else the forward over the
    cache with its rows gathered."""
    from .decode_step import DecodeStep, step_support, verified
    from .forward import cache_layers

    layers = cache_layers(cache) if cache is not None and steps > 0 and verified(model) is True else None
    if layers is not None and step_support(model) is None:
        cached = layers[0][0].shape[2]
        return _InPlace(model, DecodeStep(model, layers, mask[:, :cached], cached + steps, rows), check=False)
    if rows is not None and cache is not None:
        cache.batch_select_indices(rows)
    return _Forward(model, mask, cache)


class _Forward:
    """Steps through the model's own forward, the cache grown by concatenation and the mask by a column per step (as
    in ``generate``)."""

    def __init__(self, model: Any, mask: torch.Tensor, cache: Any) -> None:
        self.model, self.mask, self.cache = model, mask, cache
        self.tried = False

    def step(self, feed: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=feed, attention_mask=self.mask, position_ids=positions,
                         past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        self.cache = out.past_key_values
        return out.logits

    def grow(self, steps_left: int, in_place: bool) -> _Forward | _InPlace:
        """Ready for the next step: a column more of mask, or, when ``in_place`` and the model allows it, an
        :class:`_InPlace` runner over buffers for the ``steps_left`` steps still to come."""
        self.mask = torch.cat([self.mask, self.mask.new_ones((self.mask.shape[0], 1))], dim=1)
        if not in_place or steps_left < 1 or self.tried:
            return self
        self.tried = True  # one try per call: a model the step does not fit is not re-examined every token
        from .decode_step import DecodeStep, step_support, verified
        from .forward import cache_layers

        layers = cache_layers(self.cache)
        if layers is None or verified(self.model) is False or step_support(self.model) is not None:
            return self
        cached = layers[0][0].shape[2]
        stepper = DecodeStep(self.model, layers, self.mask[:, :cached], cached + steps_left)
        return _InPlace(self.model, stepper, check=verified(self.model) is None)


class _InPlace:
    """Steps through :class:`~ragen_plugins_torch.decode_step.DecodeStep` (keys and values written in place). With
    ``check``, the first step also runs through the model's own forward: the step is kept only if both logits are
    bit-identical; otherwise this call, and every later one for the model, goes on through the forward."""

    def __init__(self, model: Any, stepper: Any, check: bool) -> None:
        self.model, self.stepper, self.check = model, stepper, check
        self.fallback: _Forward | None = None

    @property
    def mask(self) -> torch.Tensor:
        return self.fallback.mask if self.fallback is not None else self.stepper.mask

    @property
    def cache(self) -> Any:
        return self.fallback.cache if self.fallback is not None else self.stepper.cache()

    def step(self, feed: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self.fallback is not None:
            return self.fallback.step(feed, positions)
        before = self.stepper.cache() if self.check else None
        logits = self.stepper.step(feed, positions)
        if self.check:
            from .decode_step import record

            self.check = False
            reference = _Forward(self.model, self.stepper.mask, before)
            expected = reference.step(feed, positions)
            same = torch.equal(expected, logits)
            record(self.model, same)
            if not same:
                self.fallback = reference
                return expected
        return logits

    def grow(self, steps_left: int, in_place: bool) -> _Forward | _InPlace:
        if self.fallback is not None:
            return self.fallback.grow(steps_left, False)
        return self


class _Noise:
    """``torch.multinomial(p, 1)`` for a ``[B, V]`` float32 ``p`` as ``argmax(p / q)``, ``q = empty_like(p)
    .exponential_(1)`` (what ATen does for one sample, so the same tokens and the same generator state), with ``q``
    for the next step drawn in a worker thread (:meth:`prepare`) while the caller runs the model. ``rows=None``
    (greedy): nothing is drawn."""

    def __init__(self, rows: int | None) -> None:
        self.rows = rows
        self.pool: Any = None
        self.next: Any = None

    def __enter__(self) -> _Noise:
        if self.rows is not None:
            import concurrent.futures

            self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragen-sampling-noise")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def prepare(self, like: torch.Tensor) -> None:
        if self.pool is not None:
            self.next = self.pool.submit(lambda: torch.empty_like(like).exponential_(1))

    def sample(self, probs: torch.Tensor) -> torch.Tensor:
        if not bool((probs.max() < float("inf")) & (probs.min() >= 0)):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        q = self.next.result() if self.next is not None else torch.empty_like(probs).exponential_(1)
        self.next = None
        return torch.argmax(probs / q, dim=-1)


def _score(step: torch.Tensor, tokens: torch.Tensor, rows: list[int] | None, temperature: float
           ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Log-prob of ``tokens`` and entropy under ``step``'s logits at ``temperature``, for ``rows`` (None: all): the
    ops of :func:`ragen_plugins_torch.policy.response_logprobs_entropy`, so the same values bit for bit."""
    idx = None if rows is None else torch.tensor(rows, device=step.device)
    x = step if idx is None else step[idx]
    if temperature != 1.0:
        x = x / max(temperature, 1e-6)
    lp = F.log_softmax(x, dim=-1)
    chosen = lp.gather(-1, (tokens if idx is None else tokens[idx]).unsqueeze(-1)).squeeze(-1)
    p = lp.exp()
    p.mul_(lp)
    return idx, chosen, -p.sum(-1)


# ----------------------------------------------------------------------------------------------- the prefix store

@attrs.define(eq=False)
class _Entry:
    """One stored row: row ``row`` of a batch's per-layer keys and values (``[B, heads, width, dim]``) and of its
    mask (``[B, width]``, 0 at padding), its first ``width`` columns (views are made only when the entry is used).
    ``nbytes`` counts those columns; a batch's tensors live while any of its rows is stored."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    batch_mask: torch.Tensor
    row: int
    width: int
    nbytes: int
    prefix_hash: int

    @property
    def mask(self) -> torch.Tensor:
        return self.batch_mask[self.row, :self.width]

    @property
    def kv(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(k[self.row, :, :self.width], v[self.row, :, :self.width]) for k, v in self.layers]

    def columns(self, tokens: int) -> int:
        """The columns that hold the entry's first ``tokens`` tokens (padding columns between them included)."""
        return int((self.mask.cumsum(0) < tokens).sum()) + 1


class _PrefixHash:
    """Hashes of every prefix of a token sequence in one vectorised pass: ``h[n] = sum(t[i] * r[i] for i < n)``
    modulo 2**64 with a fixed random ``r`` per position, so a stored sequence is found by (length, hash) with a dict
    lookup per stored length instead of a comparison with every entry (a match is confirmed by comparing tokens)."""

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.weights = np.random.default_rng(0x5EED).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)

    def __call__(self, tokens: tuple[int, ...]) -> Any:
        np = self.np
        if len(tokens) > len(self.weights):
            more = np.random.default_rng(len(self.weights)).integers(1, 2**63, size=len(tokens), dtype=np.uint64)
            self.weights = np.concatenate([self.weights, more | np.uint64(1)])
        with np.errstate(over="ignore"):
            return np.cumsum(np.asarray(tokens, dtype=np.uint64) * self.weights[:len(tokens)], dtype=np.uint64)


class PrefixStore:
    """Key/value caches of token sequences, for prompts that continue them (see the module docstring).

    A prompt is served by the longest stored sequence it starts with (one dict lookup per stored length). When none
    is, and the ``generate`` call has at most :attr:`scan_prompts` distinct prompts (a chat server's requests, not a
    rollout batch), the stored sequences are also searched for the longest common prefix, so a chat whose history is
    re-rendered with other tokens at the end of an answer still reuses the rest.

    :param max_bytes: the most bytes of keys and values held (least recently used dropped first); 0 holds nothing.
    :param min_tokens: a stored prefix shorter than this is not worth a lookup hit.
    """

    #: the most distinct prompts of a call for which a prompt without a stored prefix is compared with every entry
    scan_prompts = 8

    def __init__(self, max_bytes: int, min_tokens: int = 16) -> None:
        self.max_bytes, self.min_tokens = max_bytes, min_tokens
        self.entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._by_length: dict[int, dict[int, tuple[int, ...]]] = {}
        self._hash = _PrefixHash()
        self.nbytes = 0
        self._version: tuple[int, int, int] | None = None
        self.hits = self.misses = 0
        self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        self.entries.clear()
        self._by_length.clear()
        self.nbytes = 0

    def check_model(self, model: Any) -> None:
        """Empty the store when ``model``'s weights may have changed since the last call (another model, a parameter
        replaced by another tensor, or any parameter's in-place version counter moved)."""
        params = list(model.parameters())
        version = (id(model), sum(p._version for p in params), hash(tuple(id(p) for p in params)))
        if version != self._version:
            self.clear()
            self._version = version

    def lookup(self, prompt: tuple[int, ...], scan: bool = True) -> tuple[tuple[int, ...], int] | None:
        """The stored sequence that shares the longest prefix with ``prompt`` and that prefix's length (at most
        ``len(prompt) - 1``: the last token is fed to sample from), or None under :attr:`min_tokens`. ``scan``:
        fall back to comparing with every entry when no stored sequence is a whole prefix of ``prompt``."""
        limit = len(prompt) - 1
        if limit < self.min_tokens or not self.entries:
            return None
        hashes = self._hash(prompt[:limit])
        for n in sorted((n for n in self._by_length if n <= limit), reverse=True):
            key = self._by_length[n].get(int(hashes[n - 1]))
            if key is not None and key == prompt[:n]:
                self.entries.move_to_end(key)
                return key, n
        if not scan:
            return None
        best: tuple[tuple[int, ...], int] | None = None
        for key in reversed(self.entries):
            n = _common_prefix(key, prompt, min(len(key), limit))
            if n >= self.min_tokens and (best is None or n > best[1]):
                best = (key, n)
        if best is not None:
            self.entries.move_to_end(best[0])
        return best

    def entry(self, key: tuple[int, ...]) -> _Entry:
        return self.entries[key]

    def put(self, key: tuple[int, ...], kv: list[tuple[torch.Tensor, torch.Tensor]], mask: torch.Tensor,
            continues: tuple[int, ...] | None = None) -> None:
        """Store ``key``'s cache (``kv`` per layer ``[heads, width, dim]``, ``mask`` ``[width]``); ``continues``: the
        stored sequence this one extended, dropped now (a longer entry serves every prompt it served)."""
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        self._put(key, _Entry([(k[None], v[None]) for k, v in kv], mask[None], 0, mask.shape[0], nbytes,
                              int(self._hash(key)[-1])), continues)

    def put_rows(self, prompts: list[tuple[int, ...]], tokens: torch.Tensor, lengths: list[int],
                 layers: list[tuple[torch.Tensor, torch.Tensor]], mask: torch.Tensor,
                 continues: list[tuple[int, ...] | None], keep: list[bool] | None = None) -> None:
        """Store every row of a batch (every ``keep`` row): row ``i`` under ``prompts[i]`` and its first ``lengths[i]
        - 1`` sampled ``tokens`` (the last one was never fed), its cache the first columns of ``layers`` (``[B,
        heads, width, dim]``; the prompt's columns, then one per fed token) and of ``mask``. The keys' hashes are
        computed for the whole batch at once (each distinct prompt's, then the tokens' terms in one array
        operation)."""
        np = self._hash.np
        steps = tokens.shape[1]
        width = mask.shape[1] - steps + 1  # the prompt's columns
        column_bytes = sum(2 * k.shape[1] * k.shape[3] * k.element_size() for k, _v in layers)
        prompt_hash = {p: int(self._hash(p)[-1]) for p in dict.fromkeys(prompts)}
        self._hash(max(prompts, key=len) + (0,) * steps)  # the position weights reach every key
        offsets = np.asarray([len(p) for p in prompts])[:, None] + np.arange(max(steps - 1, 0))[None, :]
        fed = np.arange(max(steps - 1, 0))[None, :] < (np.asarray(lengths) - 1)[:, None]
        ids = tokens[:, :steps - 1].cpu().numpy().astype(np.uint64) * fed
        with np.errstate(over="ignore"):
            tails = (ids * self._hash.weights[offsets]).sum(1, dtype=np.uint64)
            hashes = (np.asarray([prompt_hash[p] for p in prompts], dtype=np.uint64) + tails).tolist()
        rows = tokens.tolist()
        for i, (p, n) in enumerate(zip(prompts, lengths)):
            if keep is not None and not keep[i]:  # not stored; the entry it continued serves nothing more either
                old = continues[i]
                if old is not None and old in self.entries:
                    self._drop(old)
                continue
            if n < 1:
                continue
            w = width + n - 1
            self._put(p + tuple(rows[i][:n - 1]), _Entry(layers, mask, i, w, w * column_bytes, hashes[i]),
                      continues[i])

    def _put(self, key: tuple[int, ...], entry: _Entry, continues: tuple[int, ...] | None) -> None:
        if continues is not None and continues in self.entries:
            self._drop(continues)
        if entry.nbytes > self.max_bytes or len(key) < self.min_tokens:
            return
        if key in self.entries:
            self._drop(key)
        while self.entries and self.nbytes + entry.nbytes > self.max_bytes:
            self._drop(next(iter(self.entries)))
        self.entries[key] = entry
        self._by_length.setdefault(len(key), {})[entry.prefix_hash] = key
        self.nbytes += entry.nbytes

    def _drop(self, key: tuple[int, ...]) -> None:
        entry = self.entries.pop(key)
        self.nbytes -= entry.nbytes
        same_length = self._by_length.get(len(key), {})
        if same_length.get(entry.prefix_hash) == key:
            del same_length[entry.prefix_hash]
            if not same_length:
                del self._by_length[len(key)]


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...], limit: int) -> int:
    """The length of the longest common prefix of ``a`` and ``b``, at most ``limit`` (halving search on slices:
    ``limit`` comparisons run in C, not in a Python loop)."""
    lo, hi = 0, limit  # a[:lo] == b[:lo]; a[:hi + 1] != b[:hi + 1] unless hi == limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
