"""``linewise view --serve``: the viewer on localhost, following episodes still running.

The server hands out the same files ``write_viewer`` writes, but makes the data
scripts (and the pages of episodes that started after the viewer was written) from the
trace at each request, so a page that re-reads them sees new steps as ``steps.jsonl``
grows. Each episode's steps file is read on from where the last request stopped; a
last line still being written is left for the next request, as ``read_steps`` ignores a
torn line.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pydantic import ValidationError

from linewise.records import StepRecord
from linewise.runtime.trace import read_summary
from linewise.runtime.viewer.build import data_script, episode_page_html, index_payload
from linewise.runtime.viewer.data import episode_outline, step_detail
from linewise.runtime.viewer.discover import EpisodeFolder, find_episodes, folder_kind
from linewise.runtime.viewer.paths import VIEW_DIR, episode_key

_DATA = re.compile(rf"^/{VIEW_DIR}/data/(?P<key>[^/]+)/(?P<file>outline\.js|step-(?P<i>\d+)\.js)$")
_PAGE = re.compile(rf"^/{VIEW_DIR}/episodes/(?P<key>[^/]+)\.html$")
_INDEX = f"/{VIEW_DIR}/data/index.js"


@dataclass
class StepsFollower:
    """The complete lines of one ``steps.jsonl`` read so far."""

    path: Path
    offset: int = 0
    records: list[StepRecord] = field(default_factory=list)

    def read(self) -> list[StepRecord]:
        size = self.path.stat().st_size if self.path.exists() else 0
        if size < self.offset:  # the file was replaced: read it again from the start
            self.offset, self.records = 0, []
        if size > self.offset:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(size - self.offset)
            complete = chunk[: chunk.rfind(b"\n") + 1]
            for line in complete.splitlines():
                if not line.strip():
                    continue
                try:
                    self.records.append(StepRecord.model_validate_json(line))
                except ValidationError:
                    break
            self.offset += len(complete)
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
        found = find_episodes(self.root)
        self.episodes = {episode_key(f.rel): f for f in found}
        return found

    def episode(self, key: str) -> EpisodeFolder | None:
        if key not in self.episodes:
            self.rescan()
        return self.episodes.get(key)

    def steps(self, folder: EpisodeFolder) -> list[StepRecord]:
        key = episode_key(folder.rel)
        follower = self.followers.setdefault(key, StepsFollower(folder.path / "steps.jsonl"))
        return follower.read()

    def answer(self, path: str) -> tuple[str, str] | None:
        """(content type, body) for the files made from the trace; None for the rest."""
        with self.lock:
            if path == _INDEX:
                payload = index_payload(self.root, self.kind, self.rescan())
                return "text/javascript", data_script("index", "", payload)
            if match := _PAGE.match(path):
                page = self.episode(match["key"])
                if page is None:
                    return None
                return "text/html", episode_page_html(page.rel, read_summary(page.path).task_id)
            match = _DATA.match(path)
            if match is None or (folder := self.episode(match["key"])) is None:
                return None
            steps = self.steps(folder)
            if match["i"] is None:
                outline = episode_outline(folder, read_summary(folder.path), steps)
                return "text/javascript", data_script("outline", match["key"], outline)
            index = int(match["i"])
            if index >= len(steps):
                return None
            detail = step_detail(folder.rel, steps[index])
            return "text/javascript", data_script("step", match["key"], detail)


class _Handler(SimpleHTTPRequestHandler):
    live: LiveTraces

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        answer = self.live.answer(path)
        if answer is None:
            super().do_GET()
            return
        content_type, text = answer
        body = text.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the terminal shows where the viewer is, not every request."""


@dataclass
class ViewerServer:
    """A running viewer server; ``url`` is the page to open."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    url: str

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_viewer(root: Path, host: str = "127.0.0.1", port: int = 0) -> ViewerServer:
    """Serve ``root`` (whose ``view/`` was written) in a background thread."""
    handler = type("ViewerHandler", (_Handler,), {"live": LiveTraces(root)})
    server = ThreadingHTTPServer((host, port), partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="linewise-view", daemon=True)
    thread.start()
    return ViewerServer(server, thread, f"http://{host}:{server.server_port}/{VIEW_DIR}/index.html")


