"""A real HTTP server that speaks the OpenAI chat-completions protocol, answering from a script.

Tests and benchmarks use it where a model's answers must be known in advance: the
runtime talks to it through the same ``openai.AsyncOpenAI`` client it uses for any
endpoint.

Two llama.cpp behaviours can be switched on: ``logprobs`` (a function giving each answer
token its log-probability, sent when a request asks for ``logprobs``) and
``follow_grammar`` (a request whose ``grammar`` is one literal, ``root ::= "..."``, is
answered with exactly that literal, as llama.cpp's constrained decoding does).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from linewise.testing.json_server import JSONServer, Reply

Script = Callable[[list[dict[str, Any]]], str]
LogprobScript = Callable[[list[dict[str, Any]], str], list[tuple[str, float]]]
"""(messages, answer text) -> the answer's tokens with their log-probabilities."""

_LITERAL_GRAMMAR = re.compile(r'^root\s*::=\s*(".*")\s*$', re.DOTALL)


def literal_of_grammar(grammar: str) -> str | None:
    """The string a one-literal GBNF grammar allows, or None for any other grammar."""
    match = _LITERAL_GRAMMAR.match(grammar.strip())
    if match is None:
        return None
    body = re.sub(r"\\x([0-9a-fA-F]{2})", r"\\u00\1", match.group(1))
    return str(json.loads(body))


def word_tokens(text: str) -> list[str]:
    """A stand-in tokenizer: words with their leading space, and punctuation on its own."""
    return re.findall(r"\s*\w+|\s*[^\w\s]|\s+", text)


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

    def __init__(
        self,
        script: Script,
        model: str = "scripted",
        delay_s: float = 0.0,
        *,
        logprobs: LogprobScript | None = None,
        follow_grammar: bool = False,
    ) -> None:
        super().__init__()
        self.script = script
        self.model = model
        self.delay_s = delay_s
        self.logprobs = logprobs
        self.follow_grammar = follow_grammar

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
        forced = literal_of_grammar(str(body.get("grammar", ""))) if self.follow_grammar \
            else None
        try:
            text = forced if forced is not None else self.script(body["messages"])
        except ScriptedHTTPError as exc:
            return exc.status, {"error": {"message": str(exc), "type": "invalid_request"}}
        except Exception as exc:  # the script's way to simulate a server error
            return 500, {"error": {"message": str(exc), "type": "server_error"}}
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
        }
        if body.get("logprobs") and self.logprobs is not None:
            choice["logprobs"] = {"content": [
                {"token": token, "logprob": logprob, "bytes": list(token.encode()),
                 "top_logprobs": []}
                for token, logprob in self.logprobs(body["messages"], text)
            ]}
        return 200, {
            "id": f"chatcmpl-{len(self.calls)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
