"""Chat calls to any OpenAI-compatible endpoint, bounded: a ``ChatModel`` over HTTP.

``ChatClient`` wraps ``openai.AsyncOpenAI`` for one endpoint and model. Its requests are
tried by ``agent.transport.Transport`` (the bound on requests in flight and per second,
one deadline per try, linewise's retries, and the mapping of endpoint faults to
``LLMError``s, the same as the embedding client's); a 200 whose body is not a chat
completion is ``InvalidResponse`` with the body kept. The trace record of a call is built
by ``agent.models.call_model``.

The client carries the endpoint's ``ModelProfile`` (``agent.profile``): what the model
takes and needs, read by every caller, and the request fields its constraints go in.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import structlog
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from linewise.agent.constraint import ConstraintKind
from linewise.agent.models import Completion, TokenLogprob, Usage
from linewise.agent.profile import ModelProfile
from linewise.agent.transport import REFUSED_STATUSES, Transport, retry_after_s
from linewise.errors import EndpointRefused, EndpointUnreachable, InvalidResponse, LLMError
from linewise.runtime.models.profiles import EMBEDDED, resolve_profile
from linewise.settings import EndpointSettings

__all__ = ["PROBE_TIMEOUT_S", "ChatClient", "retry_after_s"]

log = structlog.get_logger(__name__)

PROBE_TIMEOUT_S = 10.0


class ChatClient:
    """One endpoint and model. Safe to share between concurrent episodes.

    ``profile`` is what the model takes and needs (``agent.profile``); every caller
    reads it, and constraints reach the endpoint in the request fields it names. The
    client also remembers which constraint kinds its endpoint refused
    (``refused_constraints``, see ``agent.structured``): each client its own.
    """

    def __init__(self, endpoint: EndpointSettings, *, profile: ModelProfile | None = None,
                 embedded: bool = False) -> None:
        """``profile``: resolved by the caller (``runtime.models.factory`` resolves it
        from the run's settings); without one it is resolved from ``endpoint`` alone
        (``profiles.resolve_profile``). ``embedded`` (deprecated: set the endpoint's
        ``profile`` to ``embedded``): the endpoint is linewise's own llama.cpp server."""
        if not endpoint.base_url or not endpoint.model:
            raise LLMError("ChatClient needs a base URL and a model")
        self.base_url: str = endpoint.base_url
        self.model: str = endpoint.model
        if embedded and endpoint.profile == "auto":
            endpoint = endpoint.model_copy(update={"profile": EMBEDDED})
        self.endpoint = endpoint
        self.profile: ModelProfile = profile or resolve_profile(endpoint)
        self.refused_constraints: set[ConstraintKind] = set()
        """The constraint kinds this endpoint refused (asked without them from then on)."""
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "not-needed",
            timeout=endpoint.timeout_s,  # connect, pool, read and write: each wait
            max_retries=0,
        )
        self._transport = Transport(endpoint, base_url=self.base_url, model=self.model,
                                    context_tokens=self.profile.context_tokens)

    @property
    def context_tokens(self) -> int:
        """The context the prompts are fitted into (the profile's)."""
        return self.profile.context_tokens

    @property
    def answer_tokens(self) -> int:
        return self.profile.answer_tokens

    @property
    def embedded(self) -> bool:
        """Deprecated: read ``profile``. Whether the profile is the embedded model's."""
        return self.profile.name == EMBEDDED

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        """Send one chat completion (the ``ChatModel`` protocol).

        ``params`` go to the API as they are (``response_format``, ``stop``,
        ``extra_body``…); ``temperature`` and ``max_tokens`` default to the endpoint's.
        ``logprobs=True`` also asks for the top token, and the answer's token logprobs
        come back in the completion (choice 0). Transient faults are retried (see the
        module); what is left raises ``EndpointUnreachable`` (nothing answers),
        ``EndpointRefused`` (key or model refused), ``InvalidResponse`` (a body that is
        not a completion) or ``LLMError`` (a timeout or an error status).
        """
        params.setdefault("temperature", self.endpoint.temperature)
        params.setdefault("max_tokens", self.endpoint.max_tokens)
        if params.get("logprobs"):
            params.setdefault("top_logprobs", 1)

        async def send() -> str:
            raw = await self._client.chat.completions.with_raw_response.create(
                model=self.model, messages=messages, **params  # type: ignore[arg-type]
            )
            return raw.text  # read within the try's deadline

        return self._completion(await self._transport.call(send))

    def _completion(self, body: str) -> Completion:
        """The completion in a 200 body, or ``InvalidResponse`` keeping the body."""
        try:
            response = ChatCompletion.model_validate(json.loads(body))
        except (json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise InvalidResponse(self.base_url, f"not a chat completion ({exc})"[:300],
                                  body) from exc
        if not response.choices:
            raise InvalidResponse(self.base_url, "the completion has no choices", body)
        choice = response.choices[0]
        text = (choice.message.content if choice.message else None) or ""
        usage = (Usage.model_validate(response.usage.model_dump(exclude_none=True))
                 if response.usage is not None else None)
        content = choice.logprobs.content if choice.logprobs else None
        logprobs = ([TokenLogprob(token=item.token, logprob=item.logprob) for item in content]
                    if content else None)
        return Completion(text=text, usage=usage, logprobs=logprobs)

    async def probe(self) -> str | None:
        """One cheap request (the model list), untried again: the one check of an
        endpoint, before a run and while a bench waits out an outage. Returns when the
        endpoint answers at all, raises ``EndpointRefused`` when it refuses the key and
        ``EndpointUnreachable`` when nothing answers (a refused connection, a timeout).

        Returns who the list says serves the model (its ``owned_by``: ``llamacpp``,
        ``vllm``…, the entry of this model's name, else the first), or None: what
        ``profiles.resolve_profile`` reads when the endpoint's profile is ``auto``.

        Any status but 401/403 counts as an answer: a 404 (not every server lists
        models), and a 5xx too, which on a server that answers is most often a passing
        fault that the chat calls' own retries ride out. An unknown model is found by
        the first chat call (``EndpointRefused`` too)."""
        timeout_s = min(PROBE_TIMEOUT_S, self.endpoint.timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                listed = await self._client.models.list(timeout=timeout_s)
        except TimeoutError as exc:
            raise EndpointUnreachable(self.base_url, f"no answer in {timeout_s:g} s") from exc
        except openai.APIConnectionError as exc:  # the client's own timeouts included
            raise EndpointUnreachable(self.base_url, str(exc.__cause__ or exc)) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in REFUSED_STATUSES:
                raise EndpointRefused(self.base_url, self.model, exc.status_code,
                                      str(exc.body or exc.message)[:300]) from exc
            return None
        return _owner(getattr(listed, "data", None) or [], self.model)

    async def close(self) -> None:
        await self._client.close()


def _owner(models: list[Any], name: str) -> str | None:
    """The ``owned_by`` of the listed model called ``name``, else of the first."""
    chosen = next((m for m in models if getattr(m, "id", None) == name),
                  models[0] if models else None)
    owner = getattr(chosen, "owned_by", None)
    return owner if isinstance(owner, str) and owner else None
