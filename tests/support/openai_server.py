"""A real HTTP server that speaks the OpenAI chat-completions protocol, answering from a script.

Tests use it where a model's answers must be known in advance: the runtime talks to
it through the same ``openai.AsyncOpenAI`` client it uses for any endpoint.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[list[dict[str, Any]]], str]


class ScriptedHTTPError(Exception):
    """Raised by a script to make the server answer with this status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ScriptedChatServer:
    """Answers each chat completion with ``script(messages)``; records every request.

    ``script`` may raise to make the server answer HTTP 500 with the message.
    """

    def __init__(self, script: Script, model: str = "scripted", delay_s: float = 0.0) -> None:
        self.script = script
        self.model = model
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": outer.model, "object": "model", "owned_by": "tests"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with outer._lock:
                    outer.requests.append(request)
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                try:
                    text = outer.script(request["messages"])
                except ScriptedHTTPError as exc:
                    self._send(exc.status, {"error": {"message": str(exc), "type": "invalid"}})
                    return
                except Exception as exc:  # the script's way to simulate a server error
                    self._send(500, {"error": {"message": str(exc), "type": "server_error"}})
                    return
                self._send(200, {
                    "id": f"chatcmpl-{len(outer.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": outer.model,
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                })

        return Handler
