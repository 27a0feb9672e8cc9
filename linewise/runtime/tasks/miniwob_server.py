"""The MiniWoB++ pages, served offline: the ``miniwob`` package's ``html/`` tree on localhost.

The ``miniwob`` package ships every task as a static HTML page under ``miniwob/html/``
(``miniwob/<name>.html``, loading ``../core/core.js`` and ``../common/*`` relatively), so a
plain static HTTP server on localhost is all a task needs; nothing touches the internet.
This module knows where the pages are, which tasks exist, and serves them;
``miniwob.py`` starts and reads episodes on them.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import importlib.util
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import structlog

from linewise.errors import BrowserError, ConfigError

log = structlog.get_logger(__name__)

__all__ = [
    "MiniWoBServer",
    "available_tasks",
    "check_task_name",
    "miniwob_html_dir",
]


@functools.cache
def miniwob_html_dir() -> Path:
    """Return the ``html/`` folder of the installed ``miniwob`` package.

    The package is located with :func:`importlib.util.find_spec`, which does not run its
    ``__init__`` (that would import gymnasium and register environments for nothing).

    Raises:
        ConfigError: the ``miniwob`` package is not installed, or has no ``html/`` folder.
    """
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the 'miniwob' package is not installed (pip install miniwob==1.1.0)")
    for location in spec.submodule_search_locations:
        html = Path(location) / "html"
        if (html / "core" / "core.js").is_file() and (html / "miniwob").is_dir():
            return html
    raise ConfigError(
        f"the 'miniwob' package at {list(spec.submodule_search_locations)} has no html/ "
        "folder with core/core.js and miniwob/*.html"
    )


@functools.cache
def _task_names() -> tuple[str, ...]:
    pages = (miniwob_html_dir() / "miniwob").glob("*.html")
    return tuple(sorted(page.stem for page in pages))


def available_tasks() -> list[str]:
    """Return the names of every MiniWoB++ task the installed package ships, sorted."""
    return list(_task_names())


def check_task_name(name: str) -> str:
    """Return ``name`` if it is a MiniWoB++ task, else raise ``ValueError`` with a suggestion."""
    names = _task_names()
    if name in names:
        return name
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise ValueError(f"unknown MiniWoB++ task '{name}'{hint}")


class _QuietHandler(SimpleHTTPRequestHandler):
    """Static file handler that never writes request logs to stderr.

    Text files are served as UTF-8: the pages have no ``<meta charset>``, and without a
    charset Chromium decodes them as windows-1252 (``unicode-test`` would ask for "Ã–K"
    instead of "ÖK").
    """

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        """Return the file's MIME type, with ``charset=utf-8`` for text types."""
        ctype = super().guess_type(path)
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            return f"{ctype}; charset=utf-8"
        return ctype

    def log_message(self, format: str, *args: Any) -> None:
        """Drop the per-request access log."""

    def log_error(self, format: str, *args: Any) -> None:
        """Record failed requests (e.g. a 404 for a missing asset) at debug level only."""
        log.debug("miniwob_http_error", message=format % args)


class _QuietServer(ThreadingHTTPServer):
    """Threaded HTTP server that does not print tracebacks for dropped connections."""

    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log request-handling failures (a browser closing a socket early) at debug level."""
        log.debug("miniwob_http_request_failed", client=str(client_address), exc_info=True)


class MiniWoBServer:
    """Serve the ``miniwob`` package's ``html/`` tree on localhost from a background thread.

    Use it as an async context manager (or call :meth:`start` and :meth:`stop`)::

        async with MiniWoBServer() as server:
            await page.goto(server.url_for("click-test"))

    Args:
        host: interface to bind; keep the default so the pages are only reachable locally.
        port: TCP port; 0 picks a free one. By default ``PREFERRED_PORT`` if it is free,
            else a free one: the URL is part of every prompt (page URL, tabs, the tree's
            root), and a port that changes from run to run changes what a model answers
            even at temperature 0, so two runs of one bench could not be compared step by
            step.
    """

    PREFERRED_PORT = 8765

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self._host = host
        self._port = port
        self._httpd: _QuietServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the server is started and serving."""
        return self._httpd is not None

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self._require_started().server_address[1]

    @property
    def base_url(self) -> str:
        """The URL of the task pages' folder, ending with ``/`` (BrowserGym's ``MINIWOB_URL``)."""
        return f"http://{self._host}:{self.port}/miniwob/"

    def url_for(self, name: str) -> str:
        """Return the URL of task ``name``, e.g. ``http://127.0.0.1:PORT/miniwob/click-test.html``.

        Raises:
            ValueError: ``name`` is not a MiniWoB++ task.
            BrowserError: the server is not started.
        """
        return f"{self.base_url}{check_task_name(name)}.html"

    def start(self) -> None:
        """Bind the port and start serving in a daemon thread (a no-op if already started).

        Raises:
            BrowserError: the port cannot be bound.
        """
        if self._httpd is not None:
            return
        root = miniwob_html_dir()
        handler = functools.partial(_QuietHandler, directory=str(root))
        port = self.PREFERRED_PORT if self._port is None else self._port
        try:
            httpd = _QuietServer((self._host, port), handler)
        except OSError as exc:
            if self._port is not None:
                raise BrowserError(
                    f"cannot start the MiniWoB++ server on {self._host}:{port}: {exc}"
                ) from exc
            httpd = _QuietServer((self._host, 0), handler)
            log.info("miniwob_port_busy", busy_port=port, port=httpd.server_address[1],
                     note="serving on a free port; URLs in prompts differ from other runs")
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="miniwob-http",
            daemon=True,
        )
        thread.start()
        self._httpd, self._thread = httpd, thread
        log.debug("miniwob_server_started", base_url=self.base_url, root=str(root))

    def stop(self) -> None:
        """Stop serving and close the socket (a no-op if not started). Blocks up to ~0.1 s."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = self._thread = None
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        log.debug("miniwob_server_stopped")

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    def _require_started(self) -> _QuietServer:
        if self._httpd is None:
            raise BrowserError("the MiniWoB++ server is not started")
        return self._httpd
