"""``linewise filter-eval`` and ``linewise snapshot`` on the shipped cases and a local page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from linewise.agent.filters.truncate import NoFilter, TruncateFilter
from linewise.apps.filter_eval import evaluate, load_cases, summarize
from linewise.errors import ConfigError
from linewise.testing import ScriptedChatServer, StaticServer
from tests.support.cli import linewise
from tests.support.paths import REPO

CASES = REPO / "tasks" / "filter-cases"
HELD_OUT = ("heldout.", "heldout2.", "heldout3.")
"""Id prefixes of the held-out sets: loaded and checked, never scored by a test."""


@pytest.mark.slow
async def test_shipped_cases_load_and_score() -> None:
    cases = load_cases(CASES)
    assert len(cases) >= 12 and sum(len(c.lines) > 300 for c in cases) >= 4
    for case in cases:
        assert case.gold_count() >= 1
        for bid in case.gold_bids:
            assert any(f"[{bid}] " in line for line in case.lines), (case.id, bid)
    # the held-out sets are loaded and checked above but scored by no test
    scored = [case for case in cases if not case.id.startswith(HELD_OUT)]
    none = summarize("none", await evaluate(scored, NoFilter))
    assert none.gold_recall == 1.0 and none.mean_reduction == 0.0
    truncated = summarize("truncate", await evaluate(scored, lambda: TruncateFilter(1000)))
    assert truncated.large_mean_reduction and truncated.large_mean_reduction > 0.7
    assert truncated.large_gold_recall is not None and truncated.large_gold_recall < 1.0


def test_broken_case_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x", "goal": "g"}')
    with pytest.raises(ConfigError, match=r"bad\.json: not a valid filter case"):
        load_cases(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_cases(tmp_path / "missing")
    one = CASES / "docs.glob.json"
    with pytest.raises(ConfigError, match=r"duplicate case ids docs\.glob"):
        load_cases(one, CASES)  # the same case twice, as a file and in its folder


def keep_gold_words(messages: list[dict[str, Any]]) -> str:
    """A retriever that keeps buttons, textboxes, checkboxes, terms and headings."""
    prompt = messages[-1]["content"]
    numbers = [int(m.group(1)) for m in re.finditer(
        r"^(\d+)\|.*(button|textbox|checkbox|term|heading|clickable|image|link)", prompt, re.M)]
    return "<answer>[" + ", ".join(f"({n}, {n})" for n in numbers[:200]) + "]</answer>"


@pytest.mark.slow
def test_filter_eval_command(tmp_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    # the MiniWoB and docs cases: the large-page set is scored in test_focus_filter.py, and
    # the held-out sets are scored by no test (see benchmarks/make_filter_cases.py)
    cases = sorted(case for case in CASES.glob("*.json")
                   if not case.name.startswith(("large.", *HELD_OUT)))
    with ScriptedChatServer(keep_gold_words) as llm:
        result = linewise(
            "filter-eval", *map(str, cases), "--filter", "none", "--filter", "truncate",
            "--filter", "lines", "--filter", "lines+structure", "--max-obs-tokens", "2000",
            "--base-url", llm.base_url, "--model", "scripted", "--out", str(out), timeout=300,
        )
        retriever_calls = len(llm.requests)
    assert result.returncode == 0, result.stderr
    table = result.stdout.splitlines()
    assert table[0].split()[:4] == ["filter", "cases", "reduction", "gold"]
    rows = {line.split()[0]: line.split() for line in table[1:5]}
    assert rows["none"][2] == "0.0%" and rows["none"][3] == "100.0%"
    assert set(rows) == {"none", "truncate", "lines", "lines+structure"}
    kinds = result.stdout.split("By goal kind, pages over 300 lines:\n")[1].splitlines()
    assert kinds[0].split()[:3] == ["filter", "goal", "kind"]
    assert any(row.split()[:2] == ["lines+structure", "named"] for row in kinds)
    scores = [json.loads(line) for line in out.read_text().splitlines()]
    by_filter: dict[str, list[dict]] = {}
    for score in scores:
        by_filter.setdefault(score["filter"], []).append(score)
    n_cases = len(load_cases(*cases))
    assert {name: len(s) for name, s in by_filter.items()} == dict.fromkeys(rows, n_cases)
    structure = by_filter["lines+structure"]
    assert all(s["retriever_tokens"] > 0 for s in structure)
    large = [s for s in structure if s["lines"] > 300]
    assert large and all(s["reduction"] > 0.3 and not s["missing"] for s in large)
    # one retriever conversation per case and window serves both lines views
    assert retriever_calls < 2 * n_cases
    lines_view = {s["case_id"]: s for s in by_filter["lines"]}
    for s in structure:
        assert lines_view[s["case_id"]]["missing"] == s["missing"]
        assert lines_view[s["case_id"]]["retriever_tokens"] == s["retriever_tokens"]


@pytest.mark.slow
def test_snapshot_writes_a_case_skeleton(pages: StaticServer, tmp_path: Path) -> None:
    out = tmp_path / "form.json"
    result = linewise("snapshot", pages.url("form.html"), "--goal", "Sign up as Alice",
                      "--id", "form", "--out", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    case = json.loads(out.read_text())
    assert case["id"] == "form" and case["goal"] == "Sign up as Alice"
    assert case["lines"][0].startswith("RootWebArea 'Test form'") and case["gold_bids"] == []
    assert load_cases(out)[0].id == "form"
