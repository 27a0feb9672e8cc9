"""``linewise retriever data`` as a user runs it: real Chromium on a folder of pages, a
real OpenAI-protocol server writing the queries, real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from linewise.testing import ScriptedChatServer
from tests.support.cli import linewise
from tests.support.paths import DATA


def _docs(root: Path, name: str) -> Path:
    docs = root / name
    docs.mkdir(parents=True)
    for page in ("reference.html", "form.html"):
        shutil.copy(DATA / "pages" / page, docs / page)
    return docs


def _describe(messages: list[dict[str, Any]]) -> str:
    return "Which part tells me how to reach a remote listener and get a handle back?"


@pytest.mark.slow
def test_data_builds_a_dataset_and_a_rerun_resumes_it(tmp_path: Path) -> None:
    docs = _docs(tmp_path, "mylib-doc")
    out = tmp_path / "dataset"
    with ScriptedChatServer(_describe) as llm:
        result = linewise("retriever", "data", "--pages", str(docs), "--out", str(out),
                          "--written", "2", "--base-url", llm.base_url, "--model", "scripted")
        assert result.returncode == 0, result.stderr
        asked = len(llm.requests)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["families"] == {"mylib-doc": 2}
        assert manifest["examples"]["named"] > 0 and manifest["examples"]["written"] >= 1
        assert manifest["written"]["asked"] <= asked <= manifest["written"]["asked"] * 2
        written = [json.loads(line) for line in (out / "written.jsonl").read_text().splitlines()]
        assert all(w["kind"] == "written" and w["family"] == "mylib-doc" for w in written)
        assert "mylib-doc: 2 of 2 pages read" in result.stdout  # progress, folder by folder
        assert "2 pages of 1 families" in result.stdout

        again = linewise("retriever", "data", "--pages", str(docs), "--out", str(out),
                         "--written", "2", "--base-url", llm.base_url, "--model", "scripted")
        assert again.returncode == 0, again.stderr
        assert len(llm.requests) == asked  # every page's queries were already written
        assert "already read" in again.stdout
    assert (out / "written.jsonl").read_text().count("\n") == len(written)


@pytest.mark.slow
def test_reserved_and_evaluation_families_are_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    for name, message in (("git-doc", "reserved for independent evaluation"),
                          ("python3-doc", "held-out figures")):
        docs = _docs(tmp_path / name, name)
        out = tmp_path / f"out-{name}"
        result = linewise("retriever", "data", "--pages", str(docs), "--out", str(out))
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and str(docs) in result.stderr
        assert not (out / "examples.jsonl").exists()
    result = linewise("retriever", "data", "--out", str(tmp_path / "none"))
    assert result.returncode == 2 and "--pages" in result.stderr
