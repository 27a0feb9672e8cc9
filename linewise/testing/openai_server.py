"""A real HTTP server that speaks the OpenAI chat-completions protocol, answering from a script.

Tests and benchmarks use it where a model's answers must be known in advance: the
runtime talks to it through the same ``openai.AsyncOpenAI`` client it uses for any
endpoint.

Four endpoint behaviours can be switched on: ``logprobs`` (a function giving each answer
token its log-probability, sent when a request asks for ``logprobs``),
``follow_grammar`` (a request whose ``grammar`` is one literal, ``root ::= "..."``, is
answered with exactly that literal, as llama.cpp's constrained decoding does) and
``refuse_grammar`` (a request with a ``grammar`` field is refused with a 400, as
OpenAI's API refuses arguments it does not know) and
``context_tokens`` (a request whose prompt and ``max_tokens`` exceed the context is
refused with llama.cpp's 400; the prompt is counted with tiktoken times
``tokenizer_ratio``, since the model's tokenizer counts more than tiktoken on pages).

Faults of a real endpoint are played with ``inject``: the next chat requests are
answered by ``Fault``s (an error status with or without Retry-After, an invalid body,
no choices, a stall, a body dripped a byte at a time) before the script answers again;
``go_down``/``down_for`` play an endpoint that does not answer at all (see
``JSONServer``). A ``schedule`` plays faults
keyed on the request's number instead of its arrival time: it is asked about every
chat request (when no injected fault is pending) and may answer with a ``Fault`` or do
anything else first, e.g. take the server down, which drops that request unanswered.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from linewise.testing.json_server import JSONServer, RawReply, Reply
from linewise.tokens import count_message_tokens

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


@dataclass(frozen=True)
class Fault:
    """How one chat request is answered instead of by the script."""

    status: int = 200
    """An error status (with an OpenAI-style error body), or 200."""
    retry_after: str | None = None
    """The ``Retry-After`` header to send (seconds or an HTTP date)."""
    body: bytes | None = None
    """A raw body to send as it is (with status 200: an invalid completion)."""
    no_choices: bool = False
    """Answer 200 with a completion whose ``choices`` list is empty."""
    stall_s: float = 0.0
    """Wait this long first; with nothing else set, the script then answers."""
    drip_s: float = 0.0
    """Send the script's answer at once in the headers, then its body one byte every
    ``drip_s`` seconds: an endpoint that is never silent for long, and never done."""

    @classmethod
    def error(cls, status: int, retry_after: str | float | None = None) -> Fault:
        return cls(status=status, retry_after=None if retry_after is None else str(retry_after))

    @classmethod
    def invalid_body(cls, body: str = '{"id": "chatcmpl-1", "choices": [') -> Fault:
        return cls(body=body.encode())

    @classmethod
    def empty_choices(cls) -> Fault:
        return cls(no_choices=True)

    @classmethod
    def stall(cls, seconds: float) -> Fault:
        return cls(stall_s=seconds)

    @classmethod
    def drip(cls, seconds_per_byte: float) -> Fault:
        return cls(drip_s=seconds_per_byte)

    @property
    def answers_normally(self) -> bool:
        return self.status == 200 and self.body is None and not self.no_choices


FaultSchedule = Callable[[int, list[dict[str, Any]]], "Fault | None"]
"""(number of the chat request, from 1; its messages) -> how to answer it, None: as usual."""


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
        refuse_grammar: bool = False,
        schedule: FaultSchedule | None = None,
        context_tokens: int | None = None,
        tokenizer_ratio: float = 1.11,
        owned_by: str = "tests",
    ) -> None:
        super().__init__()
        self.owned_by = owned_by
        """Who the model list says serves the model (llama.cpp: ``llamacpp``, vLLM:
        ``vllm``), which a client's probe reads."""
        self.context_tokens = context_tokens
        self.tokenizer_ratio = tokenizer_ratio
        self.refused_for_context: list[int] = []
        """The prompt sizes (the model's count) of the requests refused as too long."""
        self.script = script
        self.model = model
        self.delay_s = delay_s
        self.logprobs = logprobs
        self.follow_grammar = follow_grammar
        self.refuse_grammar = refuse_grammar
        self.schedule = schedule
        self._faults: deque[Fault] = deque()
        self._faults_lock = threading.Lock()
        self._chat_requests = 0

    def inject(self, *faults: Fault) -> None:
        """Answer the next chat requests with ``faults``, one each, in order."""
        with self._faults_lock:
            self._faults.extend(faults)

    @property
    def pending_faults(self) -> int:
        with self._faults_lock:
            return len(self._faults)

    def _next_fault(self) -> Fault | None:
        with self._faults_lock:
            return self._faults.popleft() if self._faults else None

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat-completion requests, in arrival order."""
        return [body for method, path, body in self.calls
                if method == "POST" and path.endswith("/chat/completions")]

    def handle(self, method: str, path: str, body: dict[str, Any]) -> Reply | RawReply:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return 200, {"object": "list", "data": [
                {"id": self.model, "object": "model", "owned_by": self.owned_by}]}
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {method} {path}"}}
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._faults_lock:
            self._chat_requests += 1
            number = self._chat_requests
        fault = self._next_fault()
        if fault is None and self.schedule is not None:
            fault = self.schedule(number, body["messages"])
        if fault is not None:
            time.sleep(fault.stall_s)
            if not fault.answers_normally:
                return self._fault_reply(fault)
        reply = self._scripted_reply(body)
        if fault is not None and fault.drip_s and not isinstance(reply, RawReply):
            status, data = reply
            return RawReply(status, json.dumps(data).encode(), drip_s=fault.drip_s)
        return reply

    def _scripted_reply(self, body: dict[str, Any]) -> Reply | RawReply:
        if (refusal := self._over_context(body)) is not None:
            return refusal
        if self.refuse_grammar and "grammar" in body:
            return 400, {"error": {"message": "Unrecognized request argument supplied: grammar",
                                   "type": "invalid_request_error", "param": None}}
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

    def _over_context(self, body: dict[str, Any]) -> Reply | None:
        """llama.cpp's refusal of a request longer than its context, or None."""
        if self.context_tokens is None:
            return None
        prompt = int(count_message_tokens(body["messages"]) * self.tokenizer_ratio)
        if prompt + int(body.get("max_tokens") or 0) <= self.context_tokens:
            return None
        self.refused_for_context.append(prompt)
        return 400, {"error": {
            "code": 400, "type": "exceed_context_size_error",
            "message": f"request ({prompt} tokens) exceeds the available context size "
                       f"({self.context_tokens} tokens), try increasing it",
            "n_prompt_tokens": prompt, "n_ctx": self.context_tokens}}

    def _fault_reply(self, fault: Fault) -> RawReply:
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        if fault.body is not None:
            return RawReply(fault.status, fault.body, headers)
        if fault.no_choices:
            data: dict[str, Any] = {
                "id": "chatcmpl-empty", "object": "chat.completion",
                "created": int(time.time()), "model": self.model, "choices": [],
            }
        else:
            data = {"error": {"message": f"injected fault {fault.status}",
                              "type": "server_error" if fault.status >= 500 else "error"}}
        return RawReply(fault.status, json.dumps(data).encode(), headers)
