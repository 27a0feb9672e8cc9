"""``linewise view --serve``: the viewer on localhost, following episodes still running.

The server hands out the same files ``write_viewer`` writes, but makes the data
scripts (and the pages of episodes that started after the viewer was written) from the
trace at each request, so a page that re-reads them sees new steps as ``steps.jsonl``
grows; an index page polls ``view/data/live.json`` (each episode's status, steps and
tokens so far) and loads the whole index again only when an episode starts or ends.
Each episode's steps file is read on from where the last request stopped; a last line
still being written is left for the next request, and a damaged line is skipped with a
warning the page shows.

A trace holds prompts, pages and settings (``run.json`` is private to its owner on
disk), and every local user and every page open in a local browser can reach a
loopback port. So the server listens on loopback only, answers only under a random
token that is in the printed URL alone, and hands out only what the viewer's pages
load: the ``view/`` folder and the episodes' screenshots. Nothing else of the folder
(``run.json``, ``steps.jsonl``, Playwright traces, downloads) is ever served.

What is served is a ``Site``: one folder (``LiveTraces``), or one index over several
benches, each bench served as its own folder below it (``compare/serve.py``).
"""

from __future__ import annotations

import hmac
import mimetypes
import re
import secrets
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

import structlog

from linewise.apps.viewer.build import (
    data_script,
    episode_page_html,
    index_payload,
    live_index,
)
from linewise.apps.viewer.data import episode_outline, step_detail, summary_of
from linewise.apps.viewer.discover import EpisodeFolder, find_episodes, folder_kind
from linewise.apps.viewer.nofollow import read_below
from linewise.apps.viewer.paths import VIEW_DIR, episode_key
from linewise.errors import ConfigError
from linewise.records import StepRecord
from linewise.runtime.browser.addresses import classify, host_address
from linewise.runtime.trace import read_step_lines

log = structlog.get_logger(__name__)

_DATA = re.compile(rf"^/{VIEW_DIR}/data/(?P<key>[^/]+)/(?P<file>outline\.js|step-(?P<i>\d+)\.js)$")
_PAGE = re.compile(rf"^/{VIEW_DIR}/episodes/(?P<key>[^/]+)\.html$")
_INDEX = f"/{VIEW_DIR}/data/index.js"
_LIVE = f"/{VIEW_DIR}/data/live.json"
"""What an index page polls while the folder is written to (``build.live_index``): a
few numbers per episode, where the whole index would be read again every time."""
SCREENSHOTS_DIR = "screenshots"
SERVED_SUFFIXES = frozenset({".html", ".js", ".css", ".png"})
"""What the viewer's pages load; any other file is not served, whatever its folder."""


class Site(Protocol):
    """What the server hands out, by path below its token (``/view/index.html``)."""

    def answer(self, path: str) -> tuple[str, str] | None:
        """(content type, text) of a page or data script made at the request."""

    def file(self, path: str) -> tuple[str, bytes] | None:
        """(name, content) of a file the viewer's pages may load from disk."""


@dataclass
class StepsFollower:
    """The complete lines of one ``steps.jsonl`` read so far."""

    path: Path
    offset: int = 0
    lines: int = 0
    records: list[StepRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def read(self) -> list[StepRecord]:
        size = self.path.stat().st_size if self.path.exists() else 0
        if size < self.offset:  # the file was replaced: read it again from the start
            self.offset, self.lines, self.records, self.problems = 0, 0, [], []
        if size > self.offset:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(size - self.offset)
            read = read_step_lines(chunk, first_line=self.lines + 1)
            for problem in read.problems:
                log.warning("damaged trace", episode=str(self.path.parent), problem=problem)
            self.records += read.records
            self.problems += read.problems
            self.offset += read.complete_bytes
            self.lines += chunk[: read.complete_bytes].count(b"\n")
        return self.records


class LiveTraces:
    """The folder being served: its episodes, found again when an unknown one is asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kind = folder_kind(root)
        self.lock = threading.Lock()
        self.episodes: dict[str, EpisodeFolder] = {}
        self.followers: dict[str, StepsFollower] = {}

    def rescan(self) -> list[EpisodeFolder]:
        """The episodes under the root; one whose folder resolves outside it (a link to
        another place) is not served."""
        root = self.root.resolve()
        found = [f for f in find_episodes(self.root) if f.path.resolve().is_relative_to(root)]
        self.episodes = {episode_key(f.rel): f for f in found}
        return found

    def episode(self, key: str) -> EpisodeFolder | None:
        if key not in self.episodes:
            self.rescan()
        return self.episodes.get(key)

    def follower(self, folder: EpisodeFolder) -> StepsFollower:
        key = episode_key(folder.rel)
        follower = self.followers.setdefault(key, StepsFollower(folder.path / "steps.jsonl"))
        follower.read()
        return follower

    def file(self, path: str) -> tuple[str, bytes] | None:
        """(name, content) of the file at ``path`` if the viewer's pages may load it:
        under ``view/``, or a screenshot of a known episode; None for anything else.

        No symbolic link below the served root is followed (``nofollow.read_below``):
        a ``screenshots`` folder, an episode folder or a file that is a link could lead
        out of the root, or to another file of the run (``run.json``). The root itself
        may be a link: it is what the user named."""
        parts = path.strip("/").split("/")
        if not parts or any(part in ("", ".", "..") or "\\" in part for part in parts):
            return None
        if Path(parts[-1]).suffix not in SERVED_SUFFIXES:
            return None
        root = self.root.resolve()
        if parts[0] != VIEW_DIR:
            if len(parts) < 2 or parts[-2] != SCREENSHOTS_DIR:
                return None
            with self.lock:
                known = {f.rel for f in self.rescan()}
            if ("/".join(parts[:-2]) or ".") not in known:
                return None
        body = read_below(root, parts)
        return (parts[-1], body) if body is not None else None

    def answer(self, path: str) -> tuple[str, str] | None:
        """(content type, body) for the files made from the trace; None for the rest."""
        with self.lock:
            if path in (_INDEX, _LIVE):
                payload = index_payload(self.root, self.kind, self.rescan(),
                                        lambda folder: self.follower(folder).records)
                if path == _LIVE:
                    return "application/json", live_index(self.root, payload).model_dump_json()
                return "text/javascript", data_script("index", "", payload)
            if match := _PAGE.match(path):
                page = self.episode(match["key"])
                if page is None:
                    return None
                return "text/html", episode_page_html(page.rel, summary_of(page)[0].task_id)
            match = _DATA.match(path)
            if match is None or (folder := self.episode(match["key"])) is None:
                return None
            follower = self.follower(folder)
            steps = follower.records
            if match["i"] is None:
                summary, problems = summary_of(folder)
                outline = episode_outline(folder, summary, steps,
                                          [*problems, *follower.problems])
                return "text/javascript", data_script("outline", match["key"], outline)
            index = int(match["i"])
            if index >= len(steps):
                return None
            detail = step_detail(folder.rel, steps[index])
            return "text/javascript", data_script("step", match["key"], detail)


class _Handler(BaseHTTPRequestHandler):
    live: Site
    token: str

    def do_GET(self) -> None:
        prefix, _, rest = unquote(urlsplit(self.path).path).lstrip("/").partition("/")
        if not hmac.compare_digest(prefix.encode(), self.token.encode()):
            self.send_error(404)
            return
        path = "/" + rest
        answer = self.live.answer(path)
        if answer is not None:
            content_type, text = answer
            self._send(f"{content_type}; charset=utf-8", text.encode("utf-8"))
            return
        file = self.live.file(path)
        if file is None:
            self.send_error(404)
            return
        name, body = file
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith("javascript"):
            content_type += "; charset=utf-8"
        self._send(content_type, body)

    def _send(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        # The token is in every URL: no page may carry it elsewhere in a Referer.
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the terminal shows where the viewer is, not every request."""


@dataclass
class ViewerServer:
    """A running viewer server; ``url`` is the page to open (it holds the token)."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    url: str

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def require_loopback(host: str) -> None:
    """Refuse any address other people could reach: the viewer shows whole traces."""
    address = host_address(host)
    loopback = host == "localhost" or (address is not None
                                       and classify(address).kind == "loopback")
    if not loopback:
        raise ConfigError(f"the viewer serves on a loopback address only (127.0.0.1, ::1, "
                          f"localhost), not {host!r}: a trace holds every prompt and page")


def serve_viewer(root: Path, host: str = "127.0.0.1", port: int = 0) -> ViewerServer:
    """Serve ``root`` (whose ``view/`` was written) in a background thread, on a
    loopback address, under a fresh random token."""
    return serve_site(LiveTraces(root), host, port)


def serve_site(site: Site, host: str = "127.0.0.1", port: int = 0) -> ViewerServer:
    """Serve ``site`` in a background thread, on a loopback address, under a fresh
    random token; its ``url`` opens ``view/index.html``."""
    require_loopback(host)
    token = secrets.token_urlsafe(24)
    handler = type("ViewerHandler", (_Handler,), {"live": site, "token": token})
    server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
    server = server_class((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="linewise-view", daemon=True)
    thread.start()
    shown = f"[{host}]" if ":" in host else host
    return ViewerServer(server, thread,
                        f"http://{shown}:{server.server_port}/{token}/{VIEW_DIR}/index.html")
