"""A localhost static file server (test pages, documentation folders), in a background thread."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class StaticServer:
    """Serves ``root`` on 127.0.0.1: on ``port``, or on a free port if 0 (the default).

    A taken ``port`` raises ``OSError`` here, so a caller can fall back to another one.
    """

    def __init__(self, root: Path, port: int = 0) -> None:
        handler = functools.partial(_QuietHandler, directory=str(root))
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self._server.server_port}/{path}"

    def __enter__(self) -> StaticServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
