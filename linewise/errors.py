"""Every exception linewise raises, in one place.

The hierarchy (httpx style: catch the base class to catch them all)::

    LinewiseError
    ├── ConfigError            bad settings or flags (missing file, bad value)
    ├── TaskFileError          a task file that does not parse or validate
    ├── BrowserError           Chromium cannot be found, launched or driven
    │   ├── ObservationError   the page could not be marked or its AXTree read
    │   ├── BrowserCrashed     Chromium or the tab's renderer died under the episode
    │   ├── BrowserStalled     a browser operation of a step passed its deadline
    │   └── CDPError           a DevTools command failed, or its websocket closed
    ├── ActionError            an action the model asked for cannot be run
    │   ├── ActionParseError   the text is not an allowed call with literal arguments
    │   └── ElementNotFound    an unknown, hidden or detached bid
    ├── LLMError               the model endpoint failed
    │   ├── EndpointUnreachable  nothing answers at the configured base URL
    │   ├── EndpointRefused      401/403, or the model is unknown (404): stops the run
    │   ├── ContextOverflow      the endpoint refused a prompt over its context: the
    │   │                        configured context is wrong (the message names the fix)
    │   ├── InvalidResponse      the body is not a chat completion (bad JSON, no choices)
    │   └── ResponseFormatError  the answer is not in the asked-for format
    │       └── RangeParseError  a retriever answer holds no usable line ranges
    ├── ModelError             the embedded model cannot be assembled, verified or served
    ├── DamagedTraceError      a trace file (a steps.jsonl line, a summary.json) is damaged
    ├── ProgramError           a program to replay, or a skill, cannot be read or used
    ├── TraceWriteError        the output folder cannot be written (read-only, full, not
    │                          ours): the run stops (exit 5), naming what was not run
    └── PruneError             the trace pruner cannot use a trace or a state graph
        ├── GraphError         a state graph that is malformed, or whose sink the source
        │                      cannot reach (mining it would keep nothing meaningful)
        └── GraphBuildError    the LLM extractor gave no valid graph after its retries

An ``ActionError`` never ends an episode: its message becomes the next step's
``last_action_error``. The others end the episode (or the run, for ``ConfigError``,
``TaskFileError`` and ``EndpointRefused``) with a recorded error.

Each class says what kind of infrastructure fault it is (``infra_kind``, see
``records.InfraKind``) or ``None`` when an episode ending on it is the agent's own
outcome; ``infra_kind_of`` reads it for any exception, so the classification of an
ending lives here and in ``records.outcome_of``, nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Self

from linewise.records import InfraKind, LLMCall


class LinewiseError(Exception):
    """Base class of every error linewise raises on purpose."""

    infra_kind: ClassVar[InfraKind | None] = "crash"
    """What an episode ending on this error is (``None``: the agent's own outcome)."""


def infra_kind_of(exc: BaseException) -> InfraKind | None:
    """The infrastructure kind of an episode that ended on ``exc``: the error's own for
    linewise errors, ``crash`` (a bug) for any other exception."""
    if isinstance(exc, LinewiseError):
        return exc.infra_kind
    return "crash"


class ConfigError(LinewiseError):
    """A setting, flag or environment variable has a value that cannot work."""

    infra_kind: ClassVar[InfraKind | None] = "task"


class TaskFileError(LinewiseError):
    """A task file is missing, is not YAML, or does not match the task schema."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path

    infra_kind: ClassVar[InfraKind | None] = "task"


class BrowserError(LinewiseError):
    """Chromium could not be found, launched or driven."""

    infra_kind: ClassVar[InfraKind | None] = "browser"


class ObservationError(BrowserError):
    """The page could not be marked or its accessibility tree could not be read."""


class BrowserCrashed(BrowserError):
    """Chromium died under the episode: ``what`` is ``"browser"`` (the process crashed or
    its connection dropped; it is relaunched for the next episodes) or ``"renderer"``
    (the tab's renderer crashed). Infrastructure, not the agent's doing."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what


class BrowserStalled(BrowserError):
    """A browser operation of a step (navigation, observation, action, settle) did not
    finish within its deadline; ``stage`` names it."""

    def __init__(self, stage: str, timeout_s: float, detail: str = "") -> None:
        super().__init__(
            f"{stage} did not finish within {timeout_s:g} s" + (f": {detail}" if detail else "")
        )
        self.stage = stage
        self.timeout_s = timeout_s


class CDPError(BrowserError):
    """Chromium answered a DevTools command with an error, or the DevTools websocket closed.

    ``code`` is the DevTools error code when Chromium answered with one; ``url`` is the
    websocket the command went to.
    """

    def __init__(self, message: str, *, url: str, code: int | None = None) -> None:
        super().__init__(f"{message} ({code})" if code is not None else f"{message} ({url})")
        self.url = url
        self.code = code


class ActionError(LinewiseError):
    """An action cannot be run; the message is shown to the model as the last action error."""

    infra_kind: ClassVar[InfraKind | None] = None


class ActionParseError(ActionError):
    """The model's action text is not a single allowed call with literal arguments."""


class ElementNotFound(ActionError):
    """A bid that is not on the page, or whose element is hidden or detached."""

    def __init__(self, bid: str, reason: str = "no element with this bid on the page") -> None:
        super().__init__(f"Element with bid {bid!r}: {reason}.")
        self.bid = bid


class LLMError(LinewiseError):
    """A call to a model failed.

    ``status`` is the HTTP status the endpoint answered with, when it answered at all
    (400: it refused the request's parameters). ``call`` is the trace record of the failed
    call (messages, latency, the error), when the failure happened in a recorded call.
    Any of them is an infrastructure fault of kind ``model`` unless a subclass says
    otherwise: the endpoint failed, not the agent.
    """

    infra_kind: ClassVar[InfraKind | None] = "model"

    def __init__(
        self, message: str, *, status: int | None = None, call: LLMCall | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.call = call

    def recorded(self, call: LLMCall) -> Self:
        """The same error, of the same class, carrying the record of the call it ended."""
        return type(self)(str(self), status=self.status, call=call)


class EndpointUnreachable(LLMError):
    """Nothing answers at the configured base URL."""

    def __init__(self, base_url: str, detail: str = "", *, call: LLMCall | None = None) -> None:
        msg = f"LLM endpoint {base_url} is unreachable"
        super().__init__(f"{msg}: {detail}" if detail else msg, call=call)
        self.base_url = base_url
        self.detail = detail

    def recorded(self, call: LLMCall) -> Self:
        return type(self)(self.base_url, self.detail, call=call)


class EndpointRefused(LLMError):
    """The endpoint will not serve this run: it refused the key (401/403) or does not
    know the model (404). Retrying cannot help, so the whole run stops at once."""

    infra_kind: ClassVar[InfraKind | None] = "refused"

    def __init__(
        self, base_url: str, model: str, status: int, detail: str = "", *,
        call: LLMCall | None = None,
    ) -> None:
        reason = {401: "refused the API key", 403: "refused access",
                  404: f"does not know the model {model!r}"}.get(status, f"answered {status}")
        msg = f"LLM endpoint {base_url} {reason} ({status})"
        super().__init__(f"{msg}: {detail}" if detail else msg, status=status, call=call)
        self.base_url = base_url
        self.model = model
        self.detail = detail

    def recorded(self, call: LLMCall) -> Self:
        assert self.status is not None
        return type(self)(self.base_url, self.model, self.status, self.detail, call=call)


class ContextOverflow(LLMError):
    """The endpoint refused a request as longer than its context. linewise fits every
    action prompt to the context it was told (``context_tokens``), so this is a
    configuration error, not a passing fault: the message names the context assumed and
    the setting that fixes it."""

    infra_kind: ClassVar[InfraKind | None] = "config"

    def __init__(
        self, base_url: str, context_tokens: int | None, detail: str, *,
        call: LLMCall | None = None,
    ) -> None:
        assumed = (f"linewise fitted its prompts to {context_tokens} tokens"
                   if context_tokens else "no context size is configured")
        super().__init__(
            f"LLM endpoint {base_url} refused a request as longer than its context "
            f"({detail}); {assumed}. Set the endpoint's real context with --context-tokens "
            "(LINEWISE_ACTION__CONTEXT_TOKENS; LINEWISE_FILTER__RETRIEVER_CONTEXT_TOKENS for "
            "the retriever), or serve the model with a larger one (--ctx-size for the "
            "embedded model).", status=400, call=call)
        self.base_url = base_url
        self.context_tokens = context_tokens
        self.detail = detail

    def recorded(self, call: LLMCall) -> Self:
        return type(self)(self.base_url, self.context_tokens, self.detail, call=call)


class InvalidResponse(LLMError):
    """The endpoint answered 200 with a body that is not a usable chat completion
    (invalid JSON, no ``choices``): a fault of the endpoint, not an answer of the model.
    ``raw_body`` is what came back, kept for the trace."""

    def __init__(
        self, base_url: str, reason: str, raw_body: str, *, call: LLMCall | None = None
    ) -> None:
        super().__init__(f"LLM endpoint {base_url} sent an invalid response: {reason}",
                         status=200, call=call)
        self.base_url = base_url
        self.reason = reason
        self.raw_body = raw_body

    def recorded(self, call: LLMCall) -> Self:
        return type(self)(self.base_url, self.reason, self.raw_body, call=call)


class ResponseFormatError(LLMError):
    """The model answered, but not in the format that was asked for (after retries):
    the model's own outcome, not a fault of the endpoint."""

    infra_kind: ClassVar[InfraKind | None] = None


class RangeParseError(ResponseFormatError):
    """A retriever's answer holds no usable line ranges; the message is meant for the model,
    which is asked again with it."""


class ModelError(LinewiseError):
    """The embedded model cannot be assembled, verified or served."""

    infra_kind: ClassVar[InfraKind | None] = "server"


class DamagedTraceError(LinewiseError, ValueError):
    """A trace file cannot be read: a ``steps.jsonl`` line that is not UTF-8, not JSON,
    nested too deeply or not a step, or a ``summary.json`` that is not a summary. The
    readers skip such a line with a warning and keep the rest of the episode; a
    ``ValueError`` too, as any other unreadable file is."""


class ProgramError(LinewiseError):
    """A program to replay (``linewise replay``) or a skill cannot be read or used: a
    damaged or foreign file, a folder with nothing to replay. Bad input, named with its
    file."""

    infra_kind: ClassVar[InfraKind | None] = "task"

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class PruneError(LinewiseError):
    """The trace pruner cannot use a trace or a state graph."""


class GraphError(PruneError):
    """A state graph that is malformed (unknown node, duplicate id, an edge between two
    actions) or whose sink cannot be reached from its source.

    Mining such a graph would silently keep nothing — the failure mode of the paper's
    public code, whose wrong start node yields empty trajectories — so it is an error.
    """


class GraphBuildError(PruneError):
    """The LLM extractor could not produce a valid state graph within its retries."""


class TraceWriteError(LinewiseError):
    """The trace cannot be written: the output folder is read-only, full or refuses
    linewise (an ``OSError``: EROFS, ENOSPC, EDQUOT, EFBIG, EACCES…).

    Nothing more of the run could be recorded, so the run stops at once rather than
    going on unrecorded: the episode being written ends, no other starts, and the
    command exits with code 5. ``stopped_run`` adds what the run left undone; the
    message then names the folder, the file and the reason, the step that could not be
    saved, the episodes cut short and the tasks not run.
    """

    infra_kind: ClassVar[InfraKind | None] = "output"

    def __init__(
        self, path: str, reason: str, *, step: int | None = None, folder: str | None = None,
        cut_short: Sequence[str] = (), not_run: Sequence[str] = (), finished: int = 0,
    ) -> None:
        self.path = path
        self.reason = reason
        self.step = step
        self.folder = folder
        self.cut_short = list(cut_short)
        self.not_run = list(not_run)
        self.finished = finished
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"in {self.folder}" if self.folder else "of this run"
        lost = f"; step {self.step} is not saved" if self.step is not None else ""
        text = f"cannot write the trace {where}: {self.reason} ({self.path}{lost})"
        if self.folder is None:
            return text
        text += ". The run stopped"
        if self.cut_short:
            text += f"; cut short: {', '.join(self.cut_short)}"
        if self.finished:
            text += f"; {self.finished} episodes finished before (their traces are complete)"
        if self.not_run:
            shown = ", ".join(self.not_run[:10])
            more = f" and {len(self.not_run) - 10} more" if len(self.not_run) > 10 else ""
            text += f"; {len(self.not_run)} tasks not run: {shown}{more}"
        else:
            text += "; no task was left to run"
        return text + (". Free space or make the folder writable, then run what was cut "
                       "short and not run again (a bench: --resume).")

    def stopped_run(
        self, folder: object, *, cut_short: Sequence[str] = (), not_run: Sequence[str] = (),
        finished: int = 0,
    ) -> TraceWriteError:
        """The same failure, with what the run it stopped left undone."""
        return TraceWriteError(self.path, self.reason, step=self.step, folder=str(folder),
                               cut_short=cut_short, not_run=not_run, finished=finished)

    @classmethod
    def of(cls, path: object, exc: OSError, *, step: int | None = None) -> TraceWriteError:
        """The error of an ``OSError`` met writing ``path``."""
        return cls(str(path), exc.strerror or str(exc), step=step)
