"""benchmarks/docs_agent.py and tasks/docs-agent.yaml: the task file loads, its oracle
covers every task and agrees with the success checks, its pages are new to the filters,
and the scripted oracle acts only on what a view shows (no browser, no documentation
packages needed: ``docs_agent.py --check-pages`` checks the patterns on the real pages)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from linewise.agent.filters.retriever.escalation import _CANNOT_FIND
from linewise.agent.history import PastStep
from linewise.agent.prompt import PageView, build_action_messages
from linewise.runtime.tasks.loader import load_task_file
from linewise.runtime.tasks.schema import WebTask

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def docs_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_agent", ROOT / "benchmarks" /
                                                  "docs_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_agent"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_task_file_loads_and_the_oracle_covers_it(docs_agent: ModuleType) -> None:
    tasks = docs_agent.load_tasks()
    assert len(tasks) >= 22
    assert {t.id for t in tasks} == set(docs_agent.ORACLE)
    kinds = {docs_agent.task_kind(t) for t in tasks}
    assert kinds == {"answer", "navigate"}
    for task in tasks:
        assert task.url.startswith(docs_agent.BASE_URL)
        assert task.success is not None
        spec = docs_agent.ORACLE[task.id]
        if isinstance(spec, docs_agent.Answer):
            assert task.success.answer_contains is not None
            assert task.success.url_contains is None
            # what the oracle answers passes the task's check (case-insensitive)
            assert task.success.evaluate(task.url, "", spec.answer), task.id
            for pattern in spec.lines:
                re.compile(pattern)
        else:
            assert task.success.url_contains == spec.anchor, task.id
            assert task.success.evaluate(task.url + spec.anchor, "", None)


def test_the_pages_are_new_to_the_filters(docs_agent: ModuleType) -> None:
    used = {json.loads(p.read_text())["source"]
            for p in (ROOT / "tasks" / "filter-cases").glob("*.json")}
    used |= {f"python3-doc:{t.url.split('/html/', 1)[1]}"
             for t in load_task_file(ROOT / "tasks" / "docs-episodes.yaml")
             if isinstance(t, WebTask)}
    for task in docs_agent.load_tasks():
        path = task.url.removeprefix(docs_agent.BASE_URL)
        package, rest = path.split("/", 1)
        assert package not in {"sqlite3-doc", "git-doc"}
        assert not package.startswith("postgresql-doc"), task.id
        page = rest.removeprefix("html/")
        assert f"{package}:{page}" not in used, task.id


def prompt(goal: str, tree: str, history: list[PastStep] | None = None) -> list[dict]:
    view = PageView(url="http://127.0.0.1:8771/page.html", text=tree)
    return build_action_messages(goal, view, history or [])


def goal_of(docs_agent: ModuleType, task_id: str) -> str:
    return next(t.goal for t in docs_agent.load_tasks() if t.id == task_id)


def test_the_oracle_answers_only_when_every_needed_line_is_shown(
        docs_agent: ModuleType) -> None:
    oracle = docs_agent.DocsOracle(docs_agent.load_tasks())
    goal = goal_of(docs_agent, "socket-shutdown-both")
    both = ("[5085] code ''\n\tStaticText 'SHUT_RDWR'\n"
            "StaticText ', further sends and receives are disallowed.'")
    answer = oracle(prompt(goal, both))
    assert "send_msg_to_user(" in answer and "SHUT_RDWR" in answer
    half = oracle(prompt(goal, "StaticText ', further sends and receives are disallowed.'"))
    assert "<action>noop()</action>" in half
    think = re.search(r"<think>(.*)</think>", half)
    assert think is not None and _CANNOT_FIND.search(think.group(1))  # escalation sees it


def test_the_oracle_reads_non_breaking_spaces_as_spaces(docs_agent: ModuleType) -> None:
    oracle = docs_agent.DocsOracle(docs_agent.load_tasks())
    tree = ("StaticText 'Release\\xa03.5.0\\xa0(19\\xa0August\\xa02009)'\n"
            "StaticText 'now\\xa0works\\xa0on\\xa0Mac\\xa0OS\\xa0X.'")
    answer = oracle(prompt(goal_of(docs_agent, "valgrind-mac-release"), tree))
    assert "3.5.0" in answer and "send_msg_to_user(" in answer


def test_the_oracle_opens_the_entry_then_reports(docs_agent: ModuleType) -> None:
    oracle = docs_agent.DocsOracle(docs_agent.load_tasks())
    goal = goal_of(docs_agent, "apache-rewritemap")
    base = "http://127.0.0.1:8771/apache2-doc/manual/en/mod/mod_rewrite.html"
    other = f"[12] link 'RewriteMapX', url='{base}#rewritemapx'"
    assert "noop()" in oracle(prompt(goal, other))
    tree = f"{other}\n[894] link 'RewriteMap', url='{base}#rewritemap'"
    first = oracle(prompt(goal, tree))
    assert "<action>click('894')</action>" in first
    think = re.search(r"<think>(.*)</think>", first)
    assert think is not None
    done = oracle(prompt(goal, tree, [PastStep(think=think.group(1),
                                                 action="click('894')")]))
    assert "send_msg_to_user(" in done and "RewriteMap" in done


def test_escalation_and_context_overflow_are_read_from_the_trace(
        docs_agent: ModuleType) -> None:
    assert docs_agent.escalation_level({"escalation": {"level": 2, "reasons": []}}) == 2
    assert docs_agent.escalation_level({"auto": {"escalation": {"level": 1}}}) == 1
    assert docs_agent.escalation_level({"cost_gate": "skipped"}) == 0
    overflow = docs_agent.CONTEXT_OVERFLOW
    assert overflow.search("the request exceeds the available context size, try increasing it")
    assert overflow.search("This model's maximum context length is 32768 tokens")
    assert not overflow.search("Target page, context or browser has been closed")


def test_unknown_filters_are_skipped(docs_agent: ModuleType,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert docs_agent.known_filters(["none", "no-such-filter", "none"]) == ["none"]
    assert "skipping filter 'no-such-filter'" in capsys.readouterr().err
