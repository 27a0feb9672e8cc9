"""A localhost HTTP server for JSON APIs, in a background thread: the base of the test
servers that speak the OpenAI protocol. Subclasses answer in ``handle``.

It can also play an outage: ``go_down`` closes the listening socket and drops every
request that still arrives on an open connection, ``come_up`` listens again on the same
port, and ``down_for`` does both, some seconds apart.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class RawReply:
    """An answer given byte for byte: any status, headers and body (even invalid JSON)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    drip_s: float = 0.0
    """Send the body one byte every ``drip_s`` seconds (after the headers, at once)."""


class JSONServer:
    """Records every request as ``(method, path, body)`` and answers with ``handle``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._down = threading.Event()
        self._server = self._listen(0)
        self._port = self._server.server_port
        self._thread = self._serve(self._server)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def is_down(self) -> bool:
        return self._down.is_set()

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply | RawReply:
        raise NotImplementedError

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._down.is_set():
            self._server.shutdown()
            self._server.server_close()
        self._down.set()

    def go_down(self) -> None:
        """Stop answering: the port refuses connections and open ones are dropped."""
        with self._lock:
            if self._down.is_set():
                return
            self._down.set()
            self._server.shutdown()
            self._server.server_close()

    def come_up(self) -> None:
        """Listen again, on the same port."""
        with self._lock:
            if not self._down.is_set():
                return
            self._server = self._listen(self._port)
            self._thread = self._serve(self._server)
            self._thread.start()
            self._down.clear()

    def down_for(self, seconds: float) -> threading.Timer:
        """Go down now and come back up after ``seconds`` (in the background)."""
        self.go_down()
        timer = threading.Timer(seconds, self.come_up)
        timer.daemon = True
        timer.start()
        return timer

    def _listen(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        server.daemon_threads = True
        return server

    @staticmethod
    def _serve(server: ThreadingHTTPServer) -> threading.Thread:
        return threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                if outer._down.is_set():  # a kept-alive connection: drop it unanswered
                    self.close_connection = True
                    return
                with outer._lock:
                    outer.calls.append((method, self.path, body))
                reply = outer.handle(method, self.path, body)
                if not isinstance(reply, RawReply):
                    status, data = reply
                    reply = RawReply(status, json.dumps(data).encode())
                if outer._down.is_set():  # went down while this request was handled
                    self.close_connection = True
                    return
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if not reply.drip_s:
                        self.wfile.write(reply.body)
                    for index in range(len(reply.body) if reply.drip_s else 0):
                        self.wfile.flush()
                        time.sleep(reply.drip_s)
                        self.wfile.write(reply.body[index:index + 1])
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its timeout)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        return Handler
