"""A real HTTP server that speaks the OpenAI chat-completions protocol, answering from a script.

Tests use it where a model's answers must be known in advance: the runtime talks to
it through the same ``openai.AsyncOpenAI`` client it uses for any endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .json_server import JSONServer, Reply

Script = Callable[[list[dict[str, Any]]], str]


class ScriptedHTTPError(Exception):
    """Raised by a script to make the server answer with this status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ScriptedChatServer(JSONServer):
    """Answers each chat completion with ``script(messages)``; records every request.

    A script raising ``ScriptedHTTPError`` makes the server answer that status; any other
    exception makes it answer 500 with the message.
    """

    def __init__(self, script: Script, model: str = "scripted", delay_s: float = 0.0) -> None:
        super().__init__()
        self.script = script
        self.model = model
        self.delay_s = delay_s

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat-completion requests, in arrival order."""
        return [body for method, path, body in self.calls
                if method == "POST" and path.endswith("/chat/completions")]

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return 200, {"object": "list", "data": [
                {"id": self.model, "object": "model", "owned_by": "tests"}]}
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {method} {path}"}}
        if self.delay_s:
            time.sleep(self.delay_s)
        try:
            text = self.script(body["messages"])
        except ScriptedHTTPError as exc:
            return exc.status, {"error": {"message": str(exc), "type": "invalid_request"}}
        except Exception as exc:  # the script's way to simulate a server error
            return 500, {"error": {"message": str(exc), "type": "server_error"}}
        return 200, {
            "id": f"chatcmpl-{len(self.calls)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
