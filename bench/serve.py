"""`ragen serve` under load: N completion requests from C concurrent clients on 127.0.0.1 against the tiny model.

Prints the load average, the requests answered 200, the HTTP errors by status, the connection errors (resets,
refusals, timeouts), the latency p50/p90/p99/max of the answered ones, and the throughput. The server runs in this
process (``ModelServer`` on a free port, the tiny model's ``hf`` backend, ``max_tokens`` 4, greedy) and each client
is a thread with its own connections (``urllib``, one request per connection, as most clients do).

``--source DIR`` imports ``ragen_plugins_torch`` from another checkout (e.g. a ``git worktree`` of an older commit),
to measure the server before a change with the same bench.

Usage: python bench/serve.py [--requests 1000] [--clients 64] [--source DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--source", default=None, help="a checkout to import ragen_plugins_torch from")
    args = parser.parse_args(argv)
    if args.source:
        root = Path(args.source).resolve()
        sys.path[:0] = [str(root / "plugins"), str(root)]
    import torch

    torch.set_num_threads(1)
    from ragen_plugins_torch import serve

    print(f"server code: {serve.__file__}")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    server = serve.ModelServer(serve.HFBackend(serve.HFBackendConfig(model="tiny")), name="tiny", port=0)
    server.start()
    body = json.dumps({"prompt": "Turn 1:\nState:\n#P_O#\nYou have 2 actions left.", "max_tokens": args.max_tokens,
                       "temperature": 0}).encode()
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    todo = iter(range(args.requests))

    def client() -> None:
        while True:
            with lock:
                if next(todo, None) is None:
                    return
            req = urllib.request.Request(server.url + "/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=120) as resp:
                    resp.read()
                    outcome = str(resp.status)
            except urllib.error.HTTPError as exc:
                outcome = f"HTTP {exc.code}"
            except Exception as exc:  # a reset, refusal or timeout
                outcome = f"connection: {type(exc).__name__}"
            elapsed = time.perf_counter() - start
            with lock:
                statuses[outcome] += 1
                if outcome == "200":
                    latencies.append(elapsed)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    server.stop()
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

    print(f"{args.requests} requests, {args.clients} concurrent clients, max_tokens {args.max_tokens}")
    print(f"answered 200: {statuses.get('200', 0)}")
    errors = {k: v for k, v in statuses.items() if k != "200"}
    print(f"errors: {dict(sorted(errors.items())) or 'none'}")
    print(f"latency of answered requests: p50 {pct(0.5):.0f} ms, p90 {pct(0.9):.0f} ms, p99 {pct(0.99):.0f} ms, "
          f"max {latencies[-1] * 1000 if latencies else float('nan'):.0f} ms")
    print(f"throughput: {statuses.get('200', 0) / wall:.1f} requests/s over {wall:.1f} s")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
