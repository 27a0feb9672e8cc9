"""Training examples for the learned retriever, from real pages read by real Chromium and
from a real recorded episode."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import linewise
from linewise.apps.retriever.examples import (
    page_examples,
    read_examples,
    trace_examples,
    write_examples,
)
from linewise.apps.retriever.pages import snapshot_folders
from linewise.apps.retriever.queries import written_examples
from linewise.apps.retriever.sources import check_family, page_family
from linewise.errors import ConfigError
from linewise.testing import CallInfo, FunctionModel, StaticServer
from tests.runtime.test_replay import PAGES as REPLAY_PAGES
from tests.runtime.test_replay import _task, recording_model

PAGES = Path(__file__).parents[2] / "data" / "pages"


@pytest.mark.parametrize(("url", "family"), [
    ("http://127.0.0.1:8771/python3-doc/html/library/os.html", "python3-doc"),
    ("file:///usr/share/doc/python-flask-doc/html/config.html", "python-flask-doc"),
    ("http://127.0.0.1:8765/miniwob/click-test.html", "miniwob"),
    ("http://127.0.0.1:8000/index.html", "127.0.0.1"),
    ("https://docs.example.org/guide/install.html", "docs.example.org"),
])
def test_a_page_s_family_is_its_documentation_package_or_its_host(url: str, family: str) -> None:
    assert page_family(url) == family


def test_reserved_families_are_refused_always_and_evaluation_ones_by_default() -> None:
    for family in ("git-doc", "sqlite3-doc", "postgresql-doc-16"):
        with pytest.raises(ConfigError, match="reserved"):
            check_family(family, "somewhere", allow_evaluation=True)
    with pytest.raises(ConfigError, match="held-out"):
        check_family("python3-doc", "somewhere")
    check_family("python3-doc", "somewhere", allow_evaluation=True)
    check_family("python-flask-doc", "somewhere")


async def test_pages_give_named_and_described_examples_of_their_own_units(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "mylib-doc"
    docs.mkdir()
    shutil.copy(PAGES / "reference.html", docs / "reference.html")
    shutil.copy(PAGES / "form.html", docs / "form.html")
    with pytest.raises(ConfigError, match="reserved"):
        await snapshot_folders([tmp_path / "git-doc"])
    snapshots = await snapshot_folders([docs], per_family=5)
    assert [s.family for s in snapshots] == ["mylib-doc"] * len(snapshots)
    reference = next(s for s in snapshots if s.url.endswith("reference.html"))
    assert any("create_connection" in line for line in reference.lines)

    examples = page_examples(reference, per_page=20)
    named = [e for e in examples if e.kind == "named"]
    described = [e for e in examples if e.kind == "described"]
    assert any("create_connection" in e.query and "create_connection" in e.positive
               for e in named)
    # a described query tells what the entry does without its own words
    [connect] = [e for e in described if "create_connection" in e.positive]
    assert "TCP service" in connect.query
    assert "create" not in connect.query.lower() and "connection" not in connect.query.lower()
    for example in examples:
        assert example.positive not in example.negatives
        assert example.family == "mylib-doc"

    write_examples(examples, tmp_path / "examples.jsonl")
    assert read_examples(tmp_path / "examples.jsonl") == examples
    (tmp_path / "bad.jsonl").write_text('{"query": 1}\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        read_examples(tmp_path / "bad.jsonl")


@pytest.mark.slow
async def test_a_solved_episode_gives_one_example_per_step_that_named_an_element(
    tmp_path: Path,
) -> None:
    root = tmp_path / "site"
    shutil.copytree(REPLAY_PAGES, root)
    with StaticServer(root) as server:
        [summary] = await linewise.run(_task(server), model=recording_model(),
                                       out_dir=tmp_path / "run")
    assert summary.success is True
    examples = trace_examples([tmp_path / "run"])
    # three steps named an element; the last one's message quotes no page text
    assert len(examples) == 3
    first, fill, send = examples
    assert first.query.startswith("Send a payment reminder") and "Invoice 1042" in first.positive
    assert "click(" in fill.query  # the query carries the recent actions, without bids
    assert "Send reminder" in send.positive
    assert all(e.kind == "trace" and e.family == "127.0.0.1" for e in examples)
    with pytest.raises(ConfigError, match="holds no episode"):
        trace_examples([tmp_path / "site"])


async def test_written_queries_keep_to_the_ban_or_are_dropped(tmp_path: Path) -> None:
    docs = tmp_path / "mylib-doc"
    docs.mkdir()
    shutil.copy(PAGES / "reference.html", docs / "reference.html")
    [snapshot] = await snapshot_folders([docs])

    def write(messages: list[dict[str, Any]], info: CallInfo) -> str:
        prompt = messages[0]["content"]
        banned = prompt.split("any form of them: ", 1)[1].split("\n", 1)[0].split(", ")
        if info.params["temperature"] == 0.0:  # first try: names the element anyway
            return f"Where is {banned[0]} explained on this page?"
        if "TCP service" in prompt:
            return '"How do I open a link to a server listening on some host and port?"'
        return "Tell me."  # too short: dropped

    model = FunctionModel(write)
    examples, stats = await written_examples([snapshot], model, per_page=10)
    assert stats.asked == len(model.requests) // 2 and stats.asked >= 2
    assert stats.written == 1 and stats.dropped == stats.asked - 1
    [example] = examples
    assert example.kind == "written" and "create_connection" in example.positive
    assert example.query == "How do I open a link to a server listening on some host and port?"
    # the prompt bans the element's own words as a person reads them, not their stems
    prompt = next(r.messages[0]["content"] for r in model.requests
                  if "TCP service" in r.messages[0]["content"])
    banned = prompt.split("any form of them: ", 1)[1].split("\n", 1)[0].split(", ")
    assert {"create", "connection", "socket"} <= set(banned)
