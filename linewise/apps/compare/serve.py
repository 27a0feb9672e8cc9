"""``linewise view A B … --serve`` (and ``linewise view IMPROVE_DIR --serve``): one index
over several benches, served live.

    /TOKEN/view/index.html           the index over the benches (as ``view A B --out``
                                     writes it), its data made at each request
    /TOKEN/view/data/live.json       what the index polls: every bench's episodes
    /TOKEN/bench/N/view/…            bench N's own viewer, served as ``linewise view
                                     BENCH --serve`` serves it (``viewer/serve.py``)

Each bench is served through its own ``LiveTraces``, so what a single served folder
hands out (its ``view/`` and its episodes' screenshots, below the same token, nothing
else) is all any bench hands out here; the index's links lead to these places, not to
the folders on disk. The benches' reports are not served (a report links to files of
the bench the server does not hand out). An improve folder's benches are looked for
again at each index request: a round that starts while it is served appears.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

from linewise.agent.filters.retriever.cost_gate import Prices
from linewise.apps.compare.benches import Bench, improve_benches, read_bench
from linewise.apps.compare.data import build_comparison
from linewise.apps.compare.index import study_payload, study_rows
from linewise.apps.viewer.build import ASSETS, asset_text, data_script, page_html
from linewise.apps.viewer.data import LiveIndex, LiveRow
from linewise.apps.viewer.discover import EpisodeFolder, run_unended
from linewise.apps.viewer.paths import VIEW_DIR
from linewise.apps.viewer.serve import LiveTraces
from linewise.records import StepRecord

_BENCH = re.compile(r"^/bench/(?P<number>\d+)(?P<rest>/.*)$")
_TYPES = {".css": "text/css", ".js": "text/javascript"}


class LiveStudy:
    """The ``Site`` of several benches: their index, and each bench below it."""

    def __init__(self, read: Callable[[], list[Bench]], *, title: str,
                 improve_dir: Path | None = None) -> None:
        """``read`` gives the benches as they are now (read again at each index
        request); ``improve_dir``: they are that improve folder's rounds."""
        self.read = read
        self.title = title
        self.improve_dir = improve_dir
        self.lock = threading.Lock()
        self.folders: list[Path] = []
        """Every bench folder served so far: bench N's place in the URLs is its index
        here, which stays the same when a new bench appears."""
        self.traces: dict[Path, LiveTraces] = {}
        for bench in read():
            self._trace(bench.path)

    @classmethod
    def of_benches(cls, benches: list[Bench], title: str) -> LiveStudy:
        labels = [(b.label, b.path) for b in benches]
        return cls(lambda: [read_bench(path, label) for label, path in labels], title=title)

    @classmethod
    def of_improve(cls, improve_dir: Path) -> LiveStudy:
        return cls(lambda: [read_bench(path, label)
                            for label, path in improve_benches(improve_dir)],
                   title=improve_dir.resolve().name, improve_dir=improve_dir)

    def _trace(self, folder: Path) -> LiveTraces:
        with self.lock:
            if folder not in self.traces:
                self.folders.append(folder)
                self.traces[folder] = LiveTraces(folder)
            return self.traces[folder]

    def _number(self, folder: Path) -> int:
        self._trace(folder)
        return self.folders.index(folder)

    def _bench(self, path: str) -> tuple[LiveTraces, str] | None:
        match = _BENCH.match(path)
        if match is None:
            return None
        with self.lock:
            number = int(match["number"])
            if number >= len(self.folders):
                return None
            return self.traces[self.folders[number]], match["rest"]

    def _link(self, number: int, bench: Bench, rel: str) -> str | None:
        """From the index (``/TOKEN/view/``) to bench ``bench``'s file ``rel``."""
        if not rel.startswith(f"{VIEW_DIR}/"):
            return None  # its report: not served
        return f"../bench/{self._number(bench.path)}/{rel}"

    def _steps(self, bench: Bench, folder: EpisodeFolder) -> list[StepRecord]:
        trace = self._trace(bench.path)
        with trace.lock:
            return trace.follower(folder).records

    def answer(self, path: str) -> tuple[str, str] | None:
        if (bench := self._bench(path)) is not None:
            trace, rest = bench
            return trace.answer(rest)
        if path == f"/{VIEW_DIR}/index.html":
            return "text/html", page_html("index.html", base="", key="", title=self.title)
        if path.startswith(f"/{VIEW_DIR}/assets/") and (name := path.rsplit("/", 1)[1]) in ASSETS:
            return _TYPES[Path(name).suffix], asset_text(name)
        if path == f"/{VIEW_DIR}/data/index.js":
            benches = self.read()
            payload = study_payload(benches, build_comparison(benches, Prices()).benches,
                                    title=self.title, improve_dir=self.improve_dir,
                                    link_to=self._link, steps_of=self._steps)
            return "text/javascript", data_script("index", "", payload)
        if path == f"/{VIEW_DIR}/data/live.json":
            return "application/json", self._live().model_dump_json()
        return None

    def _live(self) -> LiveIndex:
        """live.json of the index: every bench's episodes, running while any episode
        runs or any bench's last run recorded no end."""
        benches = self.read()
        rows, not_run = study_rows(benches, self._link, self._steps)
        running = (any(row["status"] == "running" for row in rows)
                   or any(run_unended(b.path) for b in benches))
        return LiveIndex(running=running, not_run=len(not_run), episodes={
            row["key"]: LiveRow(status=row["status"], steps=row["steps"], tokens=row["tokens"])
            for row in rows})

    def file(self, path: str) -> tuple[str, bytes] | None:
        bench = self._bench(path)
        if bench is None:
            return None
        trace, rest = bench
        return trace.file(rest)
