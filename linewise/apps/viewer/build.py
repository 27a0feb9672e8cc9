"""``write_viewer``: the ``view/`` folder of an episode, run or bench folder.

    view/index.html                 the index (the episode page itself for one episode)
    view/episodes/<key>.html        one page per episode
    view/data/index.js              the index rows
    view/data/<key>/outline.js      the episode's summary and step outlines
    view/data/<key>/step-NNN.js     one step's tree, calls and filter detail
    view/assets/                    the viewer's script and style

Data files are scripts (``LW.load(...)``), not JSON, because a page opened from disk
(file://) may load scripts but not fetch files. Screenshots stay where the trace put
them and are referenced relatively. An episode whose data is newer than its trace is
not written again, so rebuilding a large bench's viewer costs only what changed.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel

from linewise.apps.viewer.data import (
    AttemptRef,
    IndexRow,
    LiveIndex,
    LiveRow,
    NotRunRow,
    attempt_ref,
    episode_outline,
    index_row,
    step_detail,
    summary_of,
)
from linewise.apps.viewer.discover import (
    EpisodeFolder,
    FolderKind,
    ResultRow,
    attempt_of,
    find_episodes,
    folder_kind,
    planned_episodes,
    planned_tasks,
    read_result_rows,
    run_unended,
)
from linewise.apps.viewer.output import ViewOutput
from linewise.apps.viewer.paths import (
    SINGLE_EPISODE,
    VIEW_DIR,
    data_dir,
    episode_key,
    episode_page,
    step_script,
)
from linewise.records import StepRecord
from linewise.runtime.trace import read_steps_checked, safe_name

log = structlog.get_logger(__name__)

ASSETS = ("viewer.css", "episode.js", "index.js", "study.js")
PROBLEMS_FILE = "problems.json"
"""Beside an episode's data: what of its trace could not be read, for the index."""


def asset_text(name: str) -> str:
    return resources.files("linewise.apps.viewer").joinpath("assets", name).read_text(
        encoding="utf-8"
    )


def data_script(kind: str, key: str, payload: Any) -> str:
    """A data file: a script handing ``payload`` to the page's ``LW.load``."""
    body = payload.model_dump_json() if isinstance(payload, BaseModel) else json.dumps(payload)
    return f"LW.load({json.dumps(kind)}, {json.dumps(key)}, {body});\n"


def page_html(template: str, *, base: str, key: str, title: str) -> str:
    """A page from its template; ``base`` leads from the page to ``view/``."""
    return (
        asset_text(template)
        .replace("__LW_BASE__", html.escape(base, quote=True))
        .replace("__LW_KEY__", html.escape(key, quote=True))
        .replace("__LW_TITLE__", html.escape(title))
    )


def episode_page_html(rel: str, title: str) -> str:
    single = rel == SINGLE_EPISODE
    return page_html("episode.html", base="" if single else "../", key=episode_key(rel),
                     title=title)


def _newer_than_trace(out: ViewOutput, marker: str, folder: Path) -> bool:
    written = out.mtime(marker)
    if written is None:
        return False
    return all(written > (folder / name).stat().st_mtime
               for name in ("steps.jsonl", "summary.json"))


def write_episode(out: ViewOutput, folder: EpisodeFolder) -> None:
    """The episode's page and data files (skipped when already newer than the trace).
    A damaged part of the trace is skipped with a warning, shown on the page too."""
    data = data_dir(folder.rel)
    outline_path = f"{data}/outline.js"
    summary, problems = summary_of(folder)
    page = "index.html" if folder.rel == SINGLE_EPISODE else episode_page(folder.rel)
    out.write_text(page, episode_page_html(folder.rel, summary.task_id))
    if _newer_than_trace(out, outline_path, folder.path):
        for problem in stored_problems(out, data):  # said again at every look, not only once
            log.warning("damaged trace", episode=str(folder.path), problem=problem)
        return
    read = read_steps_checked(folder.path)
    steps, problems = read.records, [*problems, *read.problems]
    for problem in problems:
        log.warning("damaged trace", episode=str(folder.path), problem=problem)
    out.unlink(f"{data}/{PROBLEMS_FILE}")
    if problems:
        out.write_text(f"{data}/{PROBLEMS_FILE}", json.dumps(problems))
    key = episode_key(folder.rel)
    for record in steps:
        detail = step_detail(folder.rel, record)
        out.write_text(f"{data}/{step_script(record.index)}", data_script("step", key, detail))
    outline = episode_outline(folder, summary, steps, problems)
    out.write_text(outline_path, data_script("outline", key, outline))


def stored_problems(out: ViewOutput, data: str) -> list[str]:
    """The damage ``write_episode`` found in an episode's trace (its data folder)."""
    text = out.read_text(f"{data}/{PROBLEMS_FILE}")
    try:
        found = json.loads(text) if text is not None else []
    except ValueError:
        return []
    return [str(problem) for problem in found] if isinstance(found, list) else []


StepsOf = Callable[[EpisodeFolder], list[StepRecord]]
"""The steps written so far of a running episode (``--serve`` reads on from where it
stopped; a build reads the whole file)."""


def _all_steps(folder: EpisodeFolder) -> list[StepRecord]:
    try:
        return read_steps_checked(folder.path).records
    except OSError:
        return []


def index_payload(root: Path, kind: FolderKind, episodes: list[EpisodeFolder],
                  steps_of: StepsOf = _all_steps) -> dict[str, Any]:
    """The index: one row per episode, as its last attempt ended, with its earlier
    attempts (``discover.attempt_of``); then the episodes planned that have no folder of
    their own (``not_run``): a bench's from ``bench.json``, a run's from ``run.json``.
    A running episode's steps and tokens are those of its steps so far (``steps_of``):
    its summary counts none until it ends."""
    results = read_result_rows(root)
    out = ViewOutput(root)
    rows: list[IndexRow] = []
    attempts: dict[str, list[AttemptRef]] = {}
    for folder in episodes:
        summary, problems = summary_of(folder)
        final = attempt_of(folder.rel)
        if final is not None:
            attempts.setdefault(final, []).append(attempt_ref(folder, summary))
            continue
        found = stored_problems(out, data_dir(folder.rel))
        live = steps_of(folder) if summary.status == "running" else None
        rows.append(index_row(folder, summary, results.get(folder.rel),
                              len(set(problems) | set(found)), live))
    for earlier in attempts.values():
        earlier.sort(key=lambda a: a.started_at)
    for row in rows:
        row.attempts = attempts.pop(row.rel, [])
    return {"title": root.resolve().name, "kind": kind,
            "episodes": [row.model_dump(mode="json") for row in rows],
            "not_run": [row.model_dump(mode="json")
                        for row in not_run(root, rows, attempts, results)]}


def live_index(root: Path, payload: dict[str, Any]) -> LiveIndex:
    """What an index page polls under ``--serve`` (``data.LiveIndex``), from the index
    ``payload`` it would load in full."""
    rows = payload["episodes"]
    running = any(row["status"] == "running" for row in rows)
    if payload["kind"] == "bench":
        running = running or run_unended(root)
    else:  # a run records no end: it runs while a task it planned has not started
        running = running or bool(payload["not_run"])
    return LiveIndex(running=running, not_run=len(payload["not_run"]), episodes={
        row["key"]: LiveRow(status=row["status"], steps=row["steps"], tokens=row["tokens"])
        for row in rows})


def not_run(root: Path, rows: list[IndexRow], attempts: dict[str, list[AttemptRef]],
            results: dict[str, ResultRow]) -> list[NotRunRow]:
    """The planned episodes without a folder of their own, with the attempts a bench
    set aside for them (``attempts``: by the folder the episode will have) and the
    error of a results line that has no folder."""
    planned = planned_episodes(root)
    if planned:
        shown = {row.rel for row in rows}
        left = [NotRunRow(task_id=task_id, filter=name, seed=seed,
                          attempts=attempts.pop(rel, []),
                          error=line.error if (line := results.get(rel)) is not None else None)
                for task_id, seed, name in planned
                if (rel := f"{safe_name(name)}/{safe_name(task_id)}") not in shown]
    else:
        ran = {row.task_id for row in rows}
        left = [NotRunRow(task_id=task) for task in planned_tasks(root) if task not in ran]
    # Attempts of no episode listed (a bench.json from before plans were recorded).
    return left + [NotRunRow(task_id=rel.partition("/")[2], filter=rel.partition("/")[0],
                             attempts=earlier) for rel, earlier in sorted(attempts.items())]


def write_viewer(root: Path) -> Path:
    """Write ``root/view/`` for the episode, run or bench folder ``root``; returns the
    page to open (``view/index.html``).

    Raises:
        ConfigError: ``view/``, or a folder or file linewise writes inside it, is a
            symbolic link (``output.ViewOutput``: nothing is written through it), or
            cannot be written.
    """
    kind = folder_kind(root)
    out = ViewOutput(root)
    for name in ASSETS:
        out.write_text(f"assets/{name}", asset_text(name))
    episodes = find_episodes(root)
    for folder in episodes:
        write_episode(out, folder)
    if kind != "episode":
        out.write_text("data/index.js", data_script("index", "", index_payload(root, kind,
                                                                               episodes)))
        out.write_text("index.html", page_html("index.html", base="", key="",
                                               title=root.resolve().name))
    return root / VIEW_DIR / "index.html"
