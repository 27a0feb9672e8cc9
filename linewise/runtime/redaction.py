"""Keeping secrets and API keys off disk and out of log lines.

One process-wide ``Redactor`` knows every sensitive value of the run: the values of
``<secret:NAME>`` secrets (replaced by their placeholder, so a trace still says which
secret was there) and the API keys (replaced by ``<api-key>``). It is process-wide
because the log processor is: structlog is configured once per process, before any run
knows its secrets. Everything the run writes goes through it — trace records and
summaries (``trace.py``), ``run.json``/``bench.json`` (``redact_argv``, ``redact_data``),
results lines and prune outputs — and so does every log line (``log_processor``).

Values are matched as written and in every encoding a browser, a server or a JSON
writer produces, character by character (``value_forms.py``): percent-encoding with any
set of characters left as they are (``encodeURIComponent``, form encoding, Python's
``quote``), a space as ``+``, HTML character references and JSON/JS escapes, even mixed
within one value.
"""

from __future__ import annotations

import json
import os
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from pydantic import BaseModel

from linewise.runtime.value_forms import any_encoding_of

API_KEY_PLACEHOLDER = "<api-key>"


def placeholder(name: str) -> str:
    """What the model, the traces and the logs read instead of secret ``name``'s value."""
    return f"<secret:{name}>"


REDACTED = "<redacted>"

API_KEY_ENV_VARS = ("OPENAI_API_KEY", "LINEWISE_ACTION__API_KEY", "LINEWISE_RETRIEVER__API_KEY")
"""Environment variables that hold API keys linewise may be given."""

SENSITIVE_FLAGS = ("--api-key",)
"""Flags whose value is always redacted from a recorded command line."""

MIN_VALUE_LENGTH = 3
"""Shorter values are still redacted where they stand alone (a flag value) or are
marked (``{{secret:ab}}`` on a command line) but not inside other text, where they
would blot out ordinary words and numbers."""

MARKED = re.compile(r"\{\{secret:(.+?)\}\}", re.DOTALL)
"""A secret written into a goal (``goal_secrets.py``)."""


class Redactor:
    """Replaces every registered value with its placeholder, in text and in data."""

    def __init__(self) -> None:
        self._replacements: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None
        self._pattern_ignoring_case: re.Pattern[str] | None = None
        self._groups: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, value: str | None, placeholder: str) -> None:
        """Redact ``value`` (in any encoding) as ``placeholder`` from now on.

        Its Unicode normal forms are redacted too: Chromium normalises a download's file
        name to NFC (a compatibility ideograph such as U+2F800 becomes U+4E3D, ``e`` and a
        combining accent become ``é``), and a page may send any of them.
        """
        if not value:
            return
        with self._lock:
            for form in dict.fromkeys(unicodedata.normalize(f, value)
                                      for f in ("NFC", "NFD", "NFKC", "NFKD")):
                self._replacements.setdefault(form, placeholder)
            self._replacements[value] = placeholder
            self._pattern = None

    def add_api_keys(self, keys: Iterable[str | None] = ()) -> None:
        """Register ``keys`` and the keys in the environment variables linewise reads."""
        for key in [*keys, *(os.environ.get(name) for name in API_KEY_ENV_VARS)]:
            self.add(key, API_KEY_PLACEHOLDER)

    def is_sensitive(self, text: str) -> bool:
        return self._whole(text) is not None

    def _whole(self, text: str) -> str | None:
        """The placeholder of ``text`` if it is a registered value (in any encoding)."""
        for value, placeholder in self._replacements.items():
            if re.fullmatch(any_encoding_of(value), text):
                return placeholder
        return None

    def text(self, text: str, *, ignore_case: bool = False) -> str:
        """``text`` with every registered value replaced; ``ignore_case`` for a host
        name, which the browser lowercases (``Hunter2.example`` is ``hunter2.example``)."""
        compiled = self._compiled()
        if compiled is None:
            return text
        pattern, placeholders = compiled
        if ignore_case:
            pattern = self._ignoring_case(pattern)
        return pattern.sub(lambda m: placeholders[m.lastgroup or ""], text)

    def _ignoring_case(self, pattern: re.Pattern[str]) -> re.Pattern[str]:
        with self._lock:
            if self._pattern_ignoring_case is None or (
                    self._pattern_ignoring_case.pattern != pattern.pattern):
                self._pattern_ignoring_case = re.compile(pattern.pattern, re.IGNORECASE)
            return self._pattern_ignoring_case

    def data(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings, numbers) with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.data(k) if isinstance(k, str) else k: self.data(v)
                    for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value

    def argv(self, argv: Iterable[str]) -> list[str]:
        """A command line fit to record: the value of ``--api-key`` (both ``--api-key X``
        and ``--api-key=X``), any argument that is a registered value and every
        ``{{secret:VALUE}}`` (of any length) become placeholders, then the rest is
        redacted as text."""
        out: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next:
                out.append(API_KEY_PLACEHOLDER)
                hide_next = False
                continue
            flag, eq, _ = arg.partition("=")
            if flag in SENSITIVE_FLAGS:
                if eq:
                    out.append(f"{flag}={API_KEY_PLACEHOLDER}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
            marked = MARKED.sub(lambda m: self._whole(m.group(1)) or REDACTED, arg)
            out.append(self._whole(arg) or self.text(marked))
        return out

    def _compiled(self) -> tuple[re.Pattern[str], dict[str, str]] | None:
        """One pattern for every value long enough, a named group each, and the
        placeholder of each group."""
        with self._lock:
            if self._pattern is None:
                long_enough = [v for v in self._replacements if len(v) >= MIN_VALUE_LENGTH]
                if not long_enough:
                    return None
                # Longest first, so a value containing another is replaced whole.
                ordered = sorted(long_enough, key=len, reverse=True)
                self._groups = {f"v{i}": self._replacements[v] for i, v in enumerate(ordered)}
                self._pattern = re.compile("|".join(
                    f"(?P<v{i}>{any_encoding_of(v)})" for i, v in enumerate(ordered)
                ))
            return self._pattern, self._groups

    def clear(self) -> None:
        """Forget every value (tests; a new run in the same process keeps them)."""
        with self._lock:
            self._replacements.clear()
            self._pattern = None


REDACTOR = Redactor()
"""The process's redactor (see the module docstring for why there is one)."""


def redact_text(text: str) -> str:
    return REDACTOR.text(text)


def redact_data(value: Any) -> Any:
    return REDACTOR.data(value)


def redact_argv(argv: Iterable[str]) -> list[str]:
    return REDACTOR.argv(argv)


def redacted_json(record: BaseModel, indent: int | None = None) -> str:
    """``record`` as JSON with every registered secret and key replaced by its placeholder.

    Redaction works on the values, not on the JSON text, where escaping (quotes,
    backslashes, non-ASCII) would hide a value from a plain search."""
    return json.dumps(
        REDACTOR.data(record.model_dump(mode="json")), indent=indent, ensure_ascii=False
    )


def log_processor(
    logger: object, method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """structlog processor: every value of a log line redacted (exceptions included,
    so it runs after ``format_exc_info``); a ``host`` or ``url`` in any letter case, as
    the browser lowercases host names."""
    return {key: REDACTOR.text(value, ignore_case=True)
            if key in _HOST_KEYS and isinstance(value, str) else _redact_log_value(value)
            for key, value in event.items()}


_HOST_KEYS = ("host", "url")


def _redact_log_value(value: Any) -> Any:
    if isinstance(value, str | Mapping | list | tuple):
        return REDACTOR.data(value)
    if isinstance(value, BaseException):
        return REDACTOR.text(f"{type(value).__name__}: {value}")
    return value
