"""A training set for the learned retriever, written as a folder that can be resumed.

    DIR/pages.jsonl      the page snapshots (one page per line)
    DIR/examples.jsonl   named, described and trace examples
    DIR/written.jsonl    examples whose queries a model wrote, appended page by page
    DIR/manifest.json    what went in: folders, runs, families, counts, seed, command

Written queries cost a model call each (seconds with the embedded model), so they are
appended as each page is done and a rerun skips the pages already in written.jsonl:
an interrupted build loses at most one page's queries.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from linewise.agent.models import ChatModel
from linewise.apps.retriever.examples import (
    Example,
    page_examples,
    read_examples,
    trace_examples,
    write_examples,
)
from linewise.apps.retriever.pages import snapshot_folders
from linewise.apps.retriever.queries import WrittenStats, written_examples
from linewise.apps.retriever.sources import PageSnapshot, read_snapshots
from linewise.errors import ConfigError
from linewise.files import write_atomically
from linewise.runtime.browser.chromium import BrowserConfig

__all__ = ["DatasetManifest", "DatasetOptions", "build_dataset", "load_dataset"]

PAGES_FILE = "pages.jsonl"
EXAMPLES_FILE = "examples.jsonl"
WRITTEN_FILE = "written.jsonl"
MANIFEST_FILE = "manifest.json"


class DatasetOptions(BaseModel):
    folders: list[Path] = Field(default_factory=list)
    runs: list[Path] = Field(default_factory=list)
    per_family: int = 30
    per_page: int = 40
    written_per_page: int = 0
    negatives: int = 3
    seed: int = 0
    allow_evaluation: bool = False


class DatasetManifest(BaseModel):
    version: int = 1
    options: DatasetOptions
    command: str = ""
    pages: int = 0
    families: dict[str, int] = Field(default_factory=dict)
    examples: dict[str, int] = Field(default_factory=dict, description="By kind.")
    written: WrittenStats | None = None


def _append(path: Path, examples: Sequence[Example]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(e.model_dump_json() + "\n" for e in examples)


async def build_dataset(out: Path, options: DatasetOptions, *, model: ChatModel | None = None,
                        command: str = "", config: BrowserConfig | None = None,
                        progress: Callable[[str], None] | None = None) -> DatasetManifest:
    """Snapshot the folders (once: an existing pages.jsonl is reused), derive the
    examples, and write the queries a model writes when ``written_per_page`` > 0.

    Raises:
        ConfigError: no source, a refused family, a source with nothing in it.
    """
    if not options.folders and not options.runs:
        raise ConfigError("give documentation folders (--pages) or runs (--traces)")
    if options.written_per_page and model is None:
        raise ConfigError("written queries need a model")
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _text: None)
    pages_path = out / PAGES_FILE
    snapshots: list[PageSnapshot]
    if pages_path.is_file():
        snapshots = read_snapshots(pages_path)
        say(f"{len(snapshots)} pages already read ({pages_path})")
    elif options.folders:
        snapshots = await snapshot_folders(options.folders, per_family=options.per_family,
                                           seed=options.seed,
                                           allow_evaluation=options.allow_evaluation,
                                           config=config, progress=say)
        write_atomically(pages_path, "".join(s.model_dump_json() + "\n" for s in snapshots))
        say(f"{len(snapshots)} pages read from {len(options.folders)} folders")
    else:
        snapshots = []
    examples = [e for s in snapshots
                for e in page_examples(s, per_page=options.per_page,
                                       negatives=options.negatives, seed=options.seed)]
    if options.runs:
        examples += trace_examples(options.runs, negatives=options.negatives,
                                   seed=options.seed, allow_evaluation=options.allow_evaluation)
    write_examples(examples, out / EXAMPLES_FILE)
    say(f"{len(examples)} named, described and trace examples")
    written_stats: WrittenStats | None = None
    if options.written_per_page and model is not None:
        written_path = out / WRITTEN_FILE
        done = {e.source for e in read_examples(written_path)} if written_path.is_file() \
            else set()
        written_stats = WrittenStats()
        for number, snapshot in enumerate(snapshots, start=1):
            if snapshot.url in done:
                continue
            page, stats = await written_examples([snapshot], model,
                                                 per_page=options.written_per_page,
                                                 negatives=options.negatives,
                                                 seed=options.seed)
            _append(written_path, page)
            for field in ("asked", "written", "dropped"):
                setattr(written_stats, field,
                        getattr(written_stats, field) + getattr(stats, field))
            say(f"page {number}/{len(snapshots)}: {stats.written} of {stats.asked} "
                f"written queries kept ({snapshot.url})")
    all_examples = load_dataset(out)
    manifest = DatasetManifest(
        options=options, command=command, pages=len(snapshots),
        families=dict(Counter(s.family for s in snapshots)),
        examples=dict(Counter(e.kind for e in all_examples)), written=written_stats)
    (out / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    return manifest


def load_dataset(folder: Path) -> list[Example]:
    """Every example of a dataset folder (or of one examples file).

    Raises:
        ConfigError: not a dataset, or a damaged file.
    """
    if folder.is_file():
        return read_examples(folder)
    files = [folder / name for name in (EXAMPLES_FILE, WRITTEN_FILE)]
    if not any(f.is_file() for f in files):
        raise ConfigError(f"{folder}: not a retriever dataset (no {EXAMPLES_FILE} or "
                          f"{WRITTEN_FILE}); build one with `linewise retriever data`")
    return [e for f in files if f.is_file() for e in read_examples(f)]


def manifest_of(folder: Path) -> dict[str, object]:
    """The dataset's manifest as JSON (empty when it has none)."""
    path = folder / MANIFEST_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
