"""structlog set-up: readable lines on a terminal, JSON lines otherwise (or when asked)."""

from __future__ import annotations

import logging
import sys

import structlog

from linewise.runtime.redaction import log_processor, redact_text


def configure_logging(json_lines: bool | None = None, level: str = "INFO") -> None:
    """Configure structlog and the standard library's logging, once per process.

    ``json_lines=None`` chooses JSON when stderr is not a terminal.
    """
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(
                fmt="iso" if json_lines else "%H:%M:%S", utc=json_lines
            ),
            structlog.processors.StackInfoRenderer(),
            # Tracebacks become text here even on a terminal, so that the redaction
            # below sees them: an exception message can quote a secret.
            structlog.processors.format_exc_info,
            log_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_current_stderr_logger,
        cache_logger_on_first_use=False,
    )
    # Libraries that log through the standard library (browsergym, httpx) stay quiet
    # unless something is wrong.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RedactingFilter) for f in handler.filters):
            handler.addFilter(_RedactingFilter())
    for noisy in ("httpx", "openai", "browsergym"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _current_stderr_logger(*args: object) -> structlog.PrintLogger:
    """A logger on whatever ``sys.stderr`` is now, not on the stream of the first call.

    ``main()`` may run several times in one process (tests, notebooks) with stderr
    swapped in between; a logger bound to an old, closed stream would fail later.
    """
    return structlog.PrintLogger(sys.stderr)


class _RedactingFilter(logging.Filter):
    """Secrets and API keys out of the standard library's log records too."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        return True
