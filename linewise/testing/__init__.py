"""Scripted models and local servers for testing code built on linewise.

- ``FunctionModel``: an in-process ``ChatModel`` whose answers come from a function.
- ``ScriptedChatServer``: a real HTTP server on localhost speaking the OpenAI
  chat-completions protocol, answering from a script, for code that talks to an
  endpoint (``ChatClient``, the ``linewise`` command).
- ``StaticServer``: test pages on localhost; ``JSONServer``: the base of JSON APIs.
- ``miniwob_solver``: a script that solves click-test, click-button and enter-text.
- ``bench_pages``: local pages (one with a refused iframe, one with an alert loop) and
  ``go_then_report``, a script that solves them and the MiniWoB++ tasks above.
- ``processes``: the Chromium processes a run started and their memory, from /proc.
"""

from linewise.testing.function_model import CallInfo, FunctionModel, ModelFunction, ModelRequest
from linewise.testing.json_server import JSONServer, RawReply, Reply
from linewise.testing.miniwob_solver import bid_matching, miniwob_solver, prompt_section
from linewise.testing.openai_server import (
    Fault,
    FaultSchedule,
    LogprobScript,
    Script,
    ScriptedChatServer,
    ScriptedHTTPError,
    literal_of_grammar,
    word_tokens,
)
from linewise.testing.static_server import StaticServer

__all__ = [
    "CallInfo",
    "Fault",
    "FaultSchedule",
    "FunctionModel",
    "JSONServer",
    "LogprobScript",
    "ModelFunction",
    "ModelRequest",
    "RawReply",
    "Reply",
    "Script",
    "ScriptedChatServer",
    "ScriptedHTTPError",
    "StaticServer",
    "bid_matching",
    "literal_of_grammar",
    "miniwob_solver",
    "prompt_section",
    "word_tokens",
]
