"""A Hugging Face causal LM behind the core's policy protocol: batched sampling with a KV cache and left padding
(ids in; sampled ids, their log-probs and entropies out), teacher-forced scoring, and training-time forward passes."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ragen_core.starpo.rollout import GenerationRequest, GenerationResult

from .decoding import num_threads as _num_threads
from .losses import token_logprobs_entropy

__all__ = ["MIN_COMMON_PROMPT", "HFPolicy", "common_prompt_prefix", "pad_left", "pad_right", "response_logprobs_entropy", "token_logprobs"]


#: the shortest common prompt prefix that :class:`HFPolicy` prefills once for a whole batch
MIN_COMMON_PROMPT = 16


def common_prompt_prefix(prompts: list[tuple[int, ...]]) -> int:
    """How many leading tokens all ``prompts`` share, left to run once (0 under :data:`MIN_COMMON_PROMPT` or for
    fewer than two prompts); at most the shortest prompt's length less 2, so every row keeps a token of its own in
    the prefill and its last token for ``generate``."""
    if len(prompts) < 2:
        return 0
    from .decoding import _common_prefix

    n = min(len(p) for p in prompts) - 2
    first = prompts[0]
    for p in prompts[1:]:  # each a halving search over slices: C comparisons, not a Python loop per token
        n = _common_prefix(first, p, n)
        if n < MIN_COMMON_PROMPT:
            return 0
    return n if n >= MIN_COMMON_PROMPT else 0


def pad_left(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask, each built as one flat list and converted once (no per-row tensors and
    slice assignments: those are many small ops, each a wait for the thread pool on a busy machine)."""
    width = max(len(r) for r in rows)
    ids: list[int] = []
    mask: list[int] = []
    for r in rows:
        k = width - len(r)
        ids += [pad] * k
        ids += r
        mask += [0] * k
        mask += [1] * len(r)
    shape = (len(rows), width)
    return torch.tensor(ids, dtype=torch.long).view(shape), torch.tensor(mask, dtype=torch.long).view(shape)



def pad_right(rows: list[list[Any]], fill: Any, dtype: torch.dtype) -> torch.Tensor:
    """Right-padded ``[len(rows), max_len]`` tensor."""
    width = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for i, r in enumerate(rows):
        if len(r):
            out[i, :len(r)] = torch.as_tensor(r, dtype=dtype)
    return out


class HFPolicy:
    """Wraps ``model`` and ``tokenizer`` (``tokenizer.padding_side`` is irrelevant: padding is done here).

    :param generation_batch: the most sequences sampled in one ``generate`` call.
    :param share_prompts: when several requests of a ``generate`` call have the same prompt (a GRPO group), run
        each distinct prompt through the model once and sample every request from a copy of its key/value cache
        (the prefill is most of the work for long prompts and short answers; measured with SmolLM2-135M, 16
        Bandit requests in groups of 4: see bench/README.md). The prefix that all distinct prompts of the call
        share (:func:`common_prompt_prefix`: the system prompt of every turn of a multi-turn batch) also runs once,
        and each prompt continues from its cache. ``False``: one prefill per request.
    :param prefix_cache_mb: the budget of the :class:`~ragen_plugins_torch.decoding.PrefixStore` (megabytes of keys
        and values): a prompt that continues an earlier call's prompt and response (the next turn in the ``full``
        context mode, a chat's next request) runs only its new tokens. 0 turns it off. Needs a plain cache and
        ``sdpa`` or ``eager`` attention (otherwise off).
    :param decoder: ``"native"``, the sampling loop of :mod:`~ragen_plugins_torch.decoding` (the same tokens as
        transformers' ``generate`` from the same random state, with less work per token), or ``"hf"``: transformers'
        ``generate`` itself (no prefix store), kept as the reference the native loop is tested against.
    :param generation_threads: torch intra-op threads for a whole sampling call on a CPU. None: torch's setting,
        except that the steps after the first of a model under :attr:`small_model` parameters sampling at a
        temperature above 0 run in one thread fewer (at least one), leaving a core to the worker thread that draws
        the next step's sampling noise (:func:`~ragen_plugins_torch.decoding.decode`); the prefills and the first
        step, large matrix products, keep every thread. Measured on an idle 2-core machine (bench/README.md,
        session 18): the tiny model, 64 rows, 32 tokens, 0.36 s in one thread against 0.48 s in two; greedy (no
        noise) 0.30 s against 0.25 s; a random SmolLM2-135M-shaped model, 32 rows, 12 tokens: 7.8 s in one thread,
        6.5 s in two (its forward is the work, not the noise).
    """

    #: see ``generation_threads``: below this many parameters a sampling step's ops are too small to split, and the
    #: noise worker's core is worth more than a second intra-op thread
    small_model = 10_000_000

    #: torch intra-op threads for the log-prob/entropy pass over the logits ``generate`` returns, on a CPU (None:
    #: torch's setting). That pass is a few memory-bound ops per generated position over ``[batch, vocab]``; more
    #: threads gain little on it, and on a busy machine every op waits for the slowest thread to be scheduled
    #: (measured on 2 cores at load average 5, logits of 64 rows x 24 steps x 3,072: 17 ms with 1 thread, 40 ms with 2).
    postprocess_threads: int | None = 1

    def __init__(self, model: Any, tokenizer: Any, *, device: str = "cpu", generation_batch: int = 64,
                 share_prompts: bool = True, prefix_cache_mb: float = 512, decoder: str = "native",
                 generation_threads: int | None = None) -> None:
        from .decoding import PrefixStore

        if decoder not in ("native", "hf"):
            raise ValueError(f"decoder must be 'native' or 'hf', not {decoder!r}")
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.generation_batch, self.share_prompts, self.decoder = generation_batch, share_prompts, decoder
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.generated_tokens = 0
        self.prefilled_tokens = 0  # prompt tokens run through the model (a prefix reused from the store is not)
        self._pieces: dict[int, str] = {}  # token id -> tokenizer.decode([id]): the stop scan's text, per token
        self._stop_criteria: dict[tuple[str, ...], Any] = {}  # stop strings -> transformers' StopStringCriteria
        attention = getattr(getattr(model, "config", None), "_attn_implementation", None)
        self.store = PrefixStore(int(prefix_cache_mb * 2**20)) if prefix_cache_mb > 0 and decoder == "native" \
            and attention in ("sdpa", "eager") else None
        self.generation_threads = generation_threads
        self._cpu = str(device).startswith("cpu")
        self._small: bool | None = None  # whether the model is under ``small_model`` parameters (counted once)

    # ------------------------------------------------------------------------------------------- sampling
    @torch.no_grad()
    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Sample one continuation per request, batching requests that share sampling settings."""
        out: list[GenerationResult | None] = [None] * len(requests)
        keyed: dict[tuple[Any, ...], list[int]] = {}
        for i, r in enumerate(requests):
            keyed.setdefault((r.max_new_tokens, r.temperature, r.top_p, r.top_k, r.stop), []).append(i)
        if self.store is not None:
            self.store.check_model(self.model)
        with _num_threads(self.generation_threads if self._cpu else None):
            for idx in keyed.values():
                for start in range(0, len(idx), self.generation_batch):
                    chunk = idx[start:start + self.generation_batch]
                    for i, res in zip(chunk, self._generate([requests[i] for i in chunk])):
                        out[i] = res
        return [r for r in out if r is not None]

    def step_threads(self, temperature: float) -> int | None:
        """The intra-op threads of the native loop's steps after the first when sampling at ``temperature`` (None:
        those of the rest of the call; see ``generation_threads``)."""
        if not self._cpu or self.generation_threads is not None or temperature <= 0 or self.decoder != "native":
            return None
        if self._small is None:
            self._small = sum(p.numel() for p in self.model.parameters()) < self.small_model
        return max(1, torch.get_num_threads() - 1) if self._small else None

    def _generate(self, reqs: list[GenerationRequest]) -> list[GenerationResult]:
        was_training = self.model.training
        self.model.eval()
        try:
            if self.decoder == "hf":
                new, logp, ent, lengths = self._hf_generate(reqs)
            else:
                new, logp, ent, lengths = self._native_generate(reqs)
        finally:
            if was_training:
                self.model.train()
        req = reqs[0]
        rows, logp_rows, ent_rows = new.tolist(), logp.tolist(), ent.tolist()  # three conversions, not 3 per row
        results = []
        for i, n in enumerate(lengths):
            self.generated_tokens += n
            results.append(GenerationResult(
                token_ids=tuple(rows[i][:n]), logprobs=tuple(logp_rows[i][:n]),
                finish_reason="length" if n == new.shape[1] and n == req.max_new_tokens else "stop",
                mean_entropy=sum(ent_rows[i][:n]) / n if n else None))
        return results

    def _prompt_batch(self, distinct: list[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The distinct prompts left-padded, with their common prefix (:func:`common_prompt_prefix`) kept in front:
        the padding sits between the two, where the attention mask and the positions (cumsum of the mask) skip it
        exactly as they skip left padding. Returns ids, mask and the common prefix's length."""
        root = common_prompt_prefix(distinct) if self.share_prompts else 0
        ids, mask = pad_left([list(p[root:]) for p in distinct], self.pad_id)
        if root:
            ids = torch.cat([torch.tensor(distinct[0][:root], dtype=ids.dtype).expand(len(distinct), -1), ids], 1)
            mask = torch.cat([torch.ones((len(distinct), root), dtype=mask.dtype), mask], 1)
        return ids.to(self.device), mask.to(self.device), root

    def _hf_generate(self, reqs: list[GenerationRequest]
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """transformers' ``generate`` (``decoder="hf"``), then the log-probs and entropies from its logits."""
        req = reqs[0]
        prompts = [tuple(r.prompt_ids) for r in reqs]
        distinct = list(dict.fromkeys(prompts))
        ids, mask, root = self._prompt_batch(distinct)
        self.prefilled_tokens += int(mask.sum()) - root * (len(distinct) - 1)
        cache = None
        if self.share_prompts and (len(distinct) < len(reqs) or root) and ids.shape[1] > 1:
            cache = self._prefill(ids, mask, root)
        where = {p: i for i, p in enumerate(distinct)}
        rows_of = torch.tensor([where[p] for p in prompts], device=self.device)
        ids, mask = ids[rows_of], mask[rows_of]
        if cache is not None:
            cache.batch_select_indices(rows_of)
        greedy = req.temperature <= 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": req.max_new_tokens, "do_sample": not greedy, "pad_token_id": self.pad_id,
            "eos_token_id": self.tokenizer.eos_token_id, "return_dict_in_generate": True, "output_logits": True,
            "stop_strings": None, "tokenizer": self.tokenizer,
        }
        if req.stop:
            kwargs["stopping_criteria"] = self._stopping(req.stop)
        if not greedy:
            kwargs.update(temperature=req.temperature, top_p=req.top_p, top_k=req.top_k or None)
        if cache is not None:
            kwargs["past_key_values"] = cache
        gen = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        new = gen.sequences[:, ids.shape[1]:]
        lengths = [self._length(row, req.stop) for row in new.tolist()]
        with _num_threads(self.postprocess_threads if new.device.type == "cpu" else None):
            logp, ent = response_logprobs_entropy(gen.logits, new, lengths, 1.0 if greedy else req.temperature)
        return new, logp, ent, lengths

    def _native_generate(self, reqs: list[GenerationRequest]
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """:func:`~ragen_plugins_torch.decoding.decode` from the prompts' caches: the store's where a prompt
        continues a stored sequence, otherwise a prefill (shared by equal prompts and the common prefix)."""
        from .decoding import PrefixStore, StopScan, decode, logits_warpers

        req = reqs[0]
        prompts = [tuple(r.prompt_ids) for r in reqs]
        distinct = list(dict.fromkeys(prompts))
        few = len(distinct) <= PrefixStore.scan_prompts
        extends = {p for p, r in zip(prompts, reqs) if r.extends}  # the others start no stored sequence
        hits = [self.store.lookup(p, few) if p in extends else None for p in distinct] \
            if self.store is not None and extends else []
        if any(hits):
            last, mask, cache = self._from_store(distinct, hits)
        else:
            ids, mask, root = self._prompt_batch(distinct)
            self.prefilled_tokens += int(mask.sum()) - root * (len(distinct) - 1)
            cache = None  # without a shared prompt the first step runs the whole prompt, as in ``generate``
            if self.share_prompts and (len(distinct) < len(reqs) or root) and ids.shape[1] > 1:
                cache = self._prefill(ids, mask, root)
            last = ids[:, -1:] if cache is not None else ids
        where = {p: i for i, p in enumerate(distinct)}
        rows_of = torch.tensor([where[p] for p in prompts], device=self.device)
        shared = len(distinct) < len(prompts)
        if shared:  # the cache's rows are gathered by the sampler, straight into its buffers where it can
            last, mask = last[rows_of], mask[rows_of]
        greedy = req.temperature <= 0
        warpers = [] if greedy else logits_warpers(req.temperature, req.top_k, req.top_p)
        scan = StopScan(self.tokenizer, self.tokenizer.eos_token_id, req.stop, self._pieces, len(prompts))
        out = decode(self.model, last, mask, cache, max_new_tokens=req.max_new_tokens, greedy=greedy,
                     warpers=warpers, scan=scan, pad_id=self.pad_id, temperature=1.0 if greedy else req.temperature,
                     step_threads=self.step_threads(req.temperature), cache_rows=rows_of if shared else None)
        if self.store is not None and (any(hits) or any(r.extended for r in reqs)):
            self._remember(prompts, out, [hits[where[p]] for p in prompts] if hits else [None] * len(prompts),
                           [r.extended for r in reqs])
        return out.tokens, out.logprobs, out.entropies, out.lengths

    def _from_store(self, distinct: list[tuple[int, ...]], hits: list[Any]
                    ) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """The distinct prompts' batch cache built from the store: row ``j`` holds its hit's cached columns (left
        padded to the widest), then its remaining tokens (left padded) run through the model; returns the last
        token of each row, the attention mask and the cache."""
        from transformers import DynamicCache

        assert self.store is not None
        entries = [self.store.entry(h[0]) if h else None for h in hits]
        cols = [e.columns(h[1]) if e is not None else 0 for e, h in zip(entries, hits)]
        width = max(cols)
        probe = next(e for e in entries if e is not None)
        rows = len(distinct)
        kv = [(k.new_zeros((rows, k.shape[1], width, k.shape[3])), v.new_zeros((rows, v.shape[1], width, v.shape[3])))
              for k, v in probe.layers]
        cached_mask = torch.zeros((rows, width), dtype=torch.long, device=self.device)
        for j, (e, c) in enumerate(zip(entries, cols)):
            if e is None:
                continue
            for (k, v), (ek, ev) in zip(kv, e.layers):
                k[j, :, width - c:] = ek[e.row, :, :c]
                v[j, :, width - c:] = ev[e.row, :, :c]
            cached_mask[j, width - c:] = e.batch_mask[e.row, :c]
        fresh = [list(p[h[1]:]) if h else list(p) for p, h in zip(distinct, hits)]
        ids, new_mask = pad_left(fresh, self.pad_id)
        ids, mask = ids.to(self.device), torch.cat([cached_mask, new_mask.to(self.device)], 1)
        self.prefilled_tokens += sum(len(f) for f in fresh)
        self.store.hits += sum(1 for h in hits if h)
        self.store.misses += sum(1 for h in hits if not h)
        self.store.reused_tokens += sum(h[1] for h in hits if h)
        cache = DynamicCache(ddp_cache_data=kv, config=self.model.config)
        if ids.shape[1] > 1:
            positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
            self.model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, width:-1],
                       past_key_values=cache, use_cache=True, logits_to_keep=1)
        return ids[:, -1:], mask, cache

    def _remember(self, prompts: list[tuple[int, ...]], out: Any, hits: list[Any], keep: list[bool]) -> None:
        """Store each ``keep`` row's cache under its prompt and all but its last sampled token."""
        from .forward import cache_layers

        assert self.store is not None
        layers = cache_layers(out.cache)
        if layers is None:
            return
        self.store.put_rows(prompts, out.tokens, out.lengths, layers, out.mask, [h[0] if h else None for h in hits],
                            keep)

    def _prefill(self, ids: torch.Tensor, mask: torch.Tensor, root: int = 0) -> Any:
        """The key/value cache of every padded prompt but its last token (``generate`` runs that one), at the
        positions ``generate`` gives them; ``None`` when the model returns no expandable cache. The first ``root``
        tokens, the same in every row, run once and the rows continue from that one cache."""
        from .forward import cache_layers, fork_cache

        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
        kv = cache_layers(self.model(input_ids=ids[:1, :root], use_cache=True).past_key_values) if root else None
        if kv is not None:
            out = self.model(input_ids=ids[:, root:-1], attention_mask=mask[:, :-1],
                             position_ids=positions[:, root:-1], past_key_values=fork_cache(kv, len(ids), self.model),
                             use_cache=True)
        else:
            out = self.model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
                             use_cache=True)
        cache = getattr(out, "past_key_values", None)
        return cache if hasattr(cache, "batch_select_indices") else None

    def _stopping(self, stop: tuple[str, ...]) -> Any:
        """transformers' own stop-string criterion for ``stop``, built once per stop tuple: ``generate(stop_strings=
        ...)`` builds the same object in every call, and its cache is keyed by the vocabulary in ``get_vocab()`` order,
        which changes from call to call, so it rebuilds the whole table each time (tens of ms for a 3k vocabulary,
        more for a real one). The criterion is stateless between calls, so one instance serves every call."""
        crit = self._stop_criteria.get(stop)
        if crit is None:
            from transformers import StoppingCriteriaList, StopStringCriteria

            crit = self._stop_criteria[stop] = StoppingCriteriaList(
                [StopStringCriteria(tokenizer=self.tokenizer, stop_strings=list(stop))])
        return crit

    def _length(self, tokens: list[int], stop: tuple[str, ...]) -> int:
        """Tokens up to and including the end token or the first stop string.

        The text scanned is the concatenation of the tokens decoded one at a time (``decode([t])``, cached per id);
        after each token every stop string is looked for in the last ``len(s) + 32`` characters. A stop string first
        appears there only after a token whose text holds its last character, so only those tokens are checked.
        Equal to :func:`_length_reference` (the plain token-by-token loop).
        """
        eos = self.tokenizer.eos_token_id
        if not stop:
            return next((n for n, tok in enumerate(tokens, 1) if tok == eos), len(tokens))
        pieces, decode = self._pieces, self.tokenizer.decode
        text = ""
        for n, tok in enumerate(tokens, 1):
            if tok == eos:
                return n
            piece = pieces.get(tok)
            if piece is None:
                piece = pieces[tok] = decode([tok], skip_special_tokens=False)
            text += piece
            for s in stop:
                if not s or (s[-1] in piece and s in text[-(len(s) + 32):]):
                    return n
        return len(tokens)

    # ------------------------------------------------------------------------------------------- scoring
    def forward_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, temperature: float = 1.0,
                         model: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs and entropies of ``input_ids[:, 1:]`` (``[B, T-1]``), right-padded inputs."""
        model = model or self.model
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
        return token_logprobs_entropy(logits, input_ids[:, 1:], temperature)

    @torch.inference_mode()
    def score(self, prompts: list[list[int]], continuations: list[list[int]], batch_size: int = 16) -> list[list[float]]:
        """Log-prob of each continuation token given its prompt (teacher forcing), one (prompt, continuation) pair per
        row, ``batch_size`` full sequences per forward pass. For every prompt × every continuation prefer
        :meth:`score_matrix`, which encodes each prompt once."""
        out: list[list[float]] = []
        was_training = self.model.training
        self.model.eval()
        try:
            for s in range(0, len(prompts), batch_size):
                pairs = list(zip(prompts[s:s + batch_size], continuations[s:s + batch_size]))
                for p, _c in pairs:
                    if not p:
                        raise ValueError("score: a prompt is empty (the first continuation token needs a context)")
                rows = [list(p) + list(c) for p, c in pairs]
                ids = pad_right(rows, self.pad_id, torch.long).to(self.device)
                mask = pad_right([[1] * len(r) for r in rows], 0, torch.long).to(self.device)
                logits = self.model(input_ids=ids, attention_mask=mask).logits
                for k, (p, c) in enumerate(pairs):
                    span = logits[k, len(p) - 1:len(p) - 1 + len(c)]
                    out.append(token_logprobs(span, ids[k, len(p):len(p) + len(c)]).tolist())
        finally:
            if was_training:
                self.model.train()
        return out

    #: the most tokens fed per forward pass of :meth:`score_matrix` (rows × packed length; bounds its memory)
    score_tokens: int = 8192
    #: continuations are packed into one row up to this many tokens (a longer one gets a row of its own)
    score_pack_tokens: int = 256

    @torch.inference_mode()
    def score_matrix(self, prompts: list[list[int]], continuations: list[list[int]]) -> Any:
        """Summed log-probs of every continuation after every prompt: a float64 array ``[len(prompts),
        len(continuations)]`` whose ``[j, i]`` is Σ_t log p(c_i[t] | prompt_j, c_i[:t]) (0 for an empty
        continuation), equal to summing :meth:`score` over all pairs at a fraction of the cost:

        - **one encoding per prompt.** ``prompt[:-1]`` is encoded once, prompts of similar lengths together (right
          padded; causality keeps the padding out of the real tokens' view), and its KV cache serves every
          continuation;
        - **packed continuations.** Continuations, sorted by length, are packed into rows of up to
          :attr:`score_pack_tokens` tokens as segments ``[prompt[-1], c[0], …, c[-2]]`` (the last token of a
          continuation is only ever a target), each segment at the positions that follow its prompt and seeing, through
          a 4-D attention mask, only its prompt and its own earlier tokens — the same view as in ``prompt + c`` alone;
          no padding inside a pack, and the cache is never copied per continuation;
        - **only the needed log-probs**: logit − logsumexp gathered at the target tokens, no log-softmax tensor, no
          logits over prompt tokens.

        Forward passes hold at most :attr:`score_tokens` tokens. A model whose attention takes no custom 4-D mask
        (anything but ``sdpa`` and ``eager``) is scored pair by pair through :meth:`score`.
        """
        import numpy as np

        for p in prompts:
            if not p:
                raise ValueError("score_matrix: a prompt is empty (the first continuation token needs a context)")
        out = np.zeros((len(prompts), len(continuations)), dtype=np.float64)
        todo = sorted((i for i in range(len(continuations)) if continuations[i]), key=lambda i: len(continuations[i]))
        if not todo or not prompts:
            return out
        if getattr(self.model.config, "_attn_implementation", None) not in ("sdpa", "eager"):
            pairs = [(j, i) for j in range(len(prompts)) for i in todo]
            rows = self.score([list(prompts[j]) for j, _i in pairs], [list(continuations[i]) for _j, i in pairs])
            for (j, i), row in zip(pairs, rows):
                out[j, i] = float(np.sum(np.asarray(row, dtype=np.float64)))
            return out
        packs = [_Pack(self.device, [list(continuations[i]) for i in idx], idx)
                 for idx in _pack_by_tokens(todo, [len(c) for c in continuations], self.score_pack_tokens)]
        widest = max(len(pk.targets) for pk in packs)
        was_training = self.model.training
        self.model.eval()
        try:
            by_length = sorted(range(len(prompts)), key=lambda j: len(prompts[j]))
            start = 0
            while start < len(by_length):
                group = [by_length[start]]
                while (start + len(group) < len(by_length) and (len(group) + 1) * max(
                        widest, len(prompts[by_length[start + len(group)]])) <= self.score_tokens):
                    group.append(by_length[start + len(group)])
                start += len(group)
                self._score_group([list(prompts[j]) for j in group], packs, out, group)
        finally:
            if was_training:
                self.model.train()
        return out

    def _score_group(self, prompts: list[list[int]], packs: list[_Pack], out: Any, rows_out: list[int]) -> None:
        """Score every pack after every prompt of ``prompts`` (one cache for all) into ``out[rows_out[r], …]``."""
        import numpy as np

        dtype = self.model.get_input_embeddings().weight.dtype
        if not dtype.is_floating_point:
            dtype = torch.float32
        device = self.device
        context = torch.tensor([len(p) - 1 for p in prompts], device=device)  # cached tokens of each prompt
        width = int(context.max())
        cache = None
        if width:
            ids = pad_right([p[:-1] for p in prompts], self.pad_id, torch.long).to(device)
            cache = self.model(input_ids=ids, use_cache=True, logits_to_keep=1).past_key_values
        last = torch.tensor([p[-1] for p in prompts], device=device)
        sees_prompt = (torch.arange(width, device=device)[None, :] < context[:, None])[:, None, None, :]
        rows = len(prompts)
        for pk in packs:
            q = len(pk.targets)
            feed = pk.inputs.expand(rows, q).clone()
            feed[:, pk.starts] = last[:, None]
            allowed = torch.cat([sees_prompt.expand(rows, 1, q, width), pk.allowed.expand(rows, 1, q, q)], dim=-1)
            mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
            mask.masked_fill_(~allowed, torch.finfo(dtype).min)
            positions = context[:, None] + pk.offsets[None, :]
            logits = self.model(input_ids=feed, attention_mask=mask, position_ids=positions, past_key_values=cache,
                                use_cache=cache is not None).logits
            if cache is not None:
                cache.crop(width)  # drop this pack's keys and values, keep the prompts'
            logp = token_logprobs(logits, pk.targets.expand(rows, q)).double()
            sums = torch.zeros(rows, len(pk.index), dtype=torch.float64, device=device)
            sums.index_add_(1, pk.segments, logp)
            out[np.ix_(rows_out, pk.index)] = sums.cpu().numpy()


class _Pack:
    """Continuations packed into one row: segment k is ``[prompt[-1], c_k[0], …, c_k[-2]]`` (the prompt's last token
    is filled in per row at ``starts``), targets ``c_k``; ``offsets`` are positions relative to the prompt's last token;
    ``allowed[a, b]``: token a may attend to token b (same segment, not later)."""

    def __init__(self, device: Any, conts: list[list[int]], index: list[int]) -> None:
        inputs: list[int] = []
        offsets: list[int] = []
        segments: list[int] = []
        starts: list[int] = []
        for k, c in enumerate(conts):
            starts.append(len(inputs))
            inputs += [0, *c[:-1]]
            offsets += range(len(c))
            segments += [k] * len(c)
        self.index = index  # the continuations' positions in the caller's list
        self.inputs = torch.tensor([inputs], dtype=torch.long, device=device)
        self.targets = torch.tensor([t for c in conts for t in c], dtype=torch.long, device=device)
        self.offsets = torch.tensor(offsets, dtype=torch.long, device=device)
        self.segments = torch.tensor(segments, dtype=torch.long, device=device)
        self.starts = torch.tensor(starts, dtype=torch.long, device=device)
        self.allowed = ((self.segments[:, None] == self.segments[None, :])
                        & (self.offsets[None, :] <= self.offsets[:, None]))[None, None]


def _pack_by_tokens(order: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive runs of ``order`` whose lengths add up to at most ``budget`` (at least one item each)."""
    packs: list[list[int]] = []
    size = 0
    for i in order:
        if not packs or size + lengths[i] > budget:
            packs.append([])
            size = 0
        packs[-1].append(i)
        size += lengths[i]
    return packs


def _length_reference(tokenizer: Any, tokens: list[int], stop: tuple[str, ...]) -> int:
    """:meth:`HFPolicy._length` written plainly (one ``decode`` per token, every stop string checked after every
    token): the definition the fast scan is tested against."""
    eos = tokenizer.eos_token_id
    text = ""
    for n, tok in enumerate(tokens, 1):
        if tok == eos:
            return n
        text += tokenizer.decode([tok], skip_special_tokens=False)
        if any(s in text[-(len(s) + 32):] for s in stop):
            return n
    return len(tokens)


def response_logprobs_entropy(step_logits: tuple[torch.Tensor, ...], targets: torch.Tensor, lengths: list[int],
                              temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of ``targets`` (``[B, T]``) and entropies from ``generate``'s per-step logits (``T`` tensors
    ``[B, V]``), at the positions ``t < lengths[b]`` of each row (0 elsewhere).

    Bit for bit what :func:`~ragen_plugins_torch.losses.token_logprobs_entropy` gives on ``torch.stack(step_logits,
    1)`` at those positions (the same log-softmax of each row), without the ``[B, T, V]`` stack and its
    temporaries: one step at a time (the working set stays in cache), only the rows still inside their response,
    the entropy's product formed in place, no division by a temperature of 1.
    """
    rows, width = targets.shape
    logp = torch.zeros(rows, width, dtype=torch.float32, device=targets.device)
    ent = torch.zeros(rows, width, dtype=torch.float32, device=targets.device)
    if not rows or not width:
        return logp, ent
    scale = max(temperature, 1e-6)
    lens = torch.tensor(lengths, dtype=torch.long)
    order = torch.argsort(lens, descending=True, stable=True)
    live = [int((lens > t).sum()) for t in range(width)]  # rows of `order` still inside their response at step t
    order = order.to(targets.device)
    for t in range(width):
        k = live[t]
        if not k:
            break
        idx = None if k == rows else order[:k]
        x = step_logits[t].float() if idx is None else step_logits[t][idx].float()
        if scale != 1.0:
            x = x / scale
        lp = F.log_softmax(x, dim=-1)
        tgt = targets[:, t] if idx is None else targets[idx, t]
        chosen = lp.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
        p = lp.exp()
        p.mul_(lp)
        h = -p.sum(-1)
        if idx is None:
            logp[:, t], ent[:, t] = chosen, h
        else:
            logp[idx, t], ent[idx, t] = chosen, h
    return logp, ent


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] at each position (``logits[..., t, :]`` predicts ``targets[..., t]``), in float32,
    without materialising the whole log-softmax."""
    logits = logits.float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
