"""The tests' one background HTTP server: a standard-library ``ThreadingHTTPServer`` on a free port of 127.0.0.1,
served from a daemon thread and always shut down, closed and joined."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextlib.contextmanager
def background_server(handler: type[BaseHTTPRequestHandler], **state: Any
                      ) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    """Serve ``handler`` until the block ends; yields ``(base url, server)``. Each ``state`` item becomes an
    attribute of the server (a handler reads it as ``self.server.<name>``, e.g. a hit counter)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    for name, value in state.items():
        setattr(httpd, name, value)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
