"""The documentation: every Python example in the README and in docs/ runs as written,
the README's links lead to pages that exist and its test command is the one CI runs,
and the site builds with ``mkdocs build --strict`` and renders in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from linewise.runtime.browser.chromium import BrowserSession
from tests.support.paths import REPO

DOCS = REPO / "docs"
README = REPO / "README.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]

_BLOCK = re.compile(r"(?:<!--\s*not-run:(?P<reason>[^>]*)-->\s*\n)?```python\n(?P<code>.*?)```",
                    re.DOTALL)


@dataclass(frozen=True)
class Example:
    page: Path
    index: int
    code: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO)}#{self.index}"


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        for index, match in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            reason = match["reason"]
            found.append(Example(page, index, match["code"],
                                 None if reason is None else reason.strip()))
    return found


def _python_api_example(stdout: str, folder: Path) -> None:
    lines = stdout.splitlines()
    assert lines[0] == "True 1 task_done"
    # the filter of one's own ran: the model saw fewer lines than the page has
    index, action, kept, _, total = lines[1].split()
    assert index == "0" and action.startswith("click(") and int(kept) < int(total)
    assert (folder / "runs" / "example" / "run.json").exists()


def _hooks_example(stdout: str, folder: Path) -> None:
    lines = stdout.splitlines()
    assert lines[0] == "True 1 hooked"
    assert lines[1].startswith("0 noop() True {'proposed': \"click(")
    assert lines[2].startswith("1 click(") and " False " in lines[2]


def _replay_example(stdout: str, folder: Path) -> None:
    assert stdout.splitlines() == ["True True replayed 2", "['miniwob.enter-text.seed0']"]


CHECKS: dict[str, Callable[[str, Path], None]] = {
    "docs/python-api.md#0": _python_api_example,
    "docs/python-api.md#1": _hooks_example,
    "docs/memory-and-skills.md#0": _replay_example,
}
"""What some examples print, beyond running without an error."""


def test_the_examples_are_found_and_the_checked_ones_exist() -> None:
    names = [example.name for example in examples()]
    assert set(CHECKS) <= set(names)
    assert "docs/filters.md#0" in names
    for example in examples():
        if example.not_run is not None:
            assert example.not_run, f"{example.name}: a not-run comment says why"


@pytest.mark.slow
@pytest.mark.parametrize("example", examples(), ids=lambda example: example.name)
def test_every_python_example_runs_as_written(example: Example, tmp_path: Path) -> None:
    if example.not_run is not None:
        pytest.skip(f"not run: {example.not_run}")
    script = tmp_path / "example.py"
    script.write_text(example.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    if example.name in CHECKS:
        CHECKS[example.name](result.stdout, tmp_path)


def test_the_readme_links_lead_to_pages_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(((?:docs/)[^)#\s]*)", text)
    assert "docs/index.md" in targets and "docs/design.md" in targets
    for target in targets:
        assert (REPO / target).is_file(), target
    assert len(text.splitlines()) <= 250  # the front door; the rest is in docs/


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    readme = README.read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if line.startswith("python3 -m venv"))
    assert f"```sh\n{command}\n```" in readme
    assert f"```sh\n{command}\n```" in (DOCS / "install.md").read_text(encoding="utf-8")


_CITATION = re.compile(r'docs/(?P<page>[\w/-]+\.md),? \\?"(?P<heading>[^"\\]+)\\?"')


def _headings(page: Path) -> set[str]:
    return {re.sub(r"`", "", line.lstrip("#").strip())
            for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def test_every_heading_the_code_cites_is_in_its_page() -> None:
    """Docstrings and messages cite a page's heading for the why of a rule
    (``docs/design.md, "Re-asks"``); a heading renamed must take its citations along."""
    cited = []
    sources = [*sorted((REPO / "linewise").rglob("*.py")), *sorted(REPO.glob("tests/**/*.py"))]
    for source in sources:
        # a citation may wrap onto the next line of a docstring or a comment
        text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", source.read_text(encoding="utf-8"))
        for match in _CITATION.finditer(text):
            page = DOCS / match["page"]
            assert page.is_file(), f"{source}: cites {match['page']}"
            cited.append(match["heading"])
            assert match["heading"] in _headings(page), (
                f"{source}: {match['page']} has no heading {match['heading']!r}")
    assert "Re-asks" in cited and "Exit codes" in cited


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(REPO / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


async def test_the_site_builds_strictly_and_reads_from_disk(
    site: Path, session: BrowserSession,
) -> None:
    page = session.page
    await page.goto((site / "index.html").as_uri())
    assert await page.title() == "linewise"
    nav = " ".join((await page.locator("nav.md-nav--primary").inner_text()).split())
    for title in ("Installing", "Running agents", "Use it from Python", "Observation filters",
                  "Security", "Design", "Contributing", "API reference", "Errors"):
        assert title in nav, title
    picture = page.locator("img[src='viewer.png']")
    assert await picture.evaluate("img => img.complete && img.naturalWidth > 0")

    # the API reference is generated from the docstrings
    await page.goto((site / "reference" / "running.html").as_uri())
    run = page.locator("[id='linewise.runtime.run.run']")
    assert await run.count() == 1
    article = await page.locator("article").inner_text()
    assert "Run tasks from Python: the library's entry point." in article
    assert "replay_sync" in article and "load_task_file" in article
    await page.goto((site / "reference" / "errors.html").as_uri())
    article = await page.locator("article").inner_text()
    assert "TraceWriteError" in article and "LinewiseError" in article

    # a guide's link to another page's heading lands on it
    await page.goto((site / "running.html").as_uri())
    await page.click("a[href='failures.html#exit-codes']")
    assert page.url.endswith("failures.html#exit-codes")
    assert await page.locator("h2#exit-codes").is_visible()
