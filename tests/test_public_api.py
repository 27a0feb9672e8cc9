"""The public API: what ``import linewise`` offers is pinned, and the README's example runs
as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import linewise
from tests.support.paths import REPO

README = REPO / "README.md"

PUBLIC = [
    "ActionError", "ActionParseError", "AgentSettings", "AnyTask", "BrowserCrashed",
    "BrowserError", "BrowserGymTask", "BrowserSettings", "BrowserStalled", "CDPError",
    "ChatModel", "Completion", "ConfigError", "ElementNotFound", "EndpointRefused",
    "EndpointSettings", "EndpointUnreachable", "EpisodeSummary", "FilterContext",
    "FilterInput", "FilterResult", "FilterSettings", "GraphBuildError", "GraphError",
    "InvalidResponse", "LLMCall", "LLMError", "LinewiseError",
    "LinewiseSettings", "MiniWoBTask", "ModelError", "ObservationError", "ObservationFilter",
    "PruneError", "RangeParseError", "ResponseFormatError", "StepContext", "StepHooks",
    "StepRecord", "SuccessCheck", "Tab", "TaskFileError", "Usage", "WebTask", "__version__",
    "filter_names", "load_task_file", "read_steps", "read_summary", "register_filter", "run",
    "run_sync",
]


def test_the_public_names_are_pinned() -> None:
    assert sorted(linewise.__all__) == sorted(PUBLIC)
    for name in linewise.__all__:
        assert getattr(linewise, name) is not None, name


def test_every_public_error_is_a_linewise_error() -> None:
    errors = [getattr(linewise, n) for n in PUBLIC
              if n.endswith(("Error", "Crashed", "Stalled", "Refused", "Response"))
              or n == "ElementNotFound"]
    assert errors and all(issubclass(e, linewise.LinewiseError) for e in errors)


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    section = README.read_text(encoding="utf-8").split("## Use it from Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "the README's Python section has no example"
    script = tmp_path / "example.py"
    script.write_text(code.group(1), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "True 1 task_done"
    # the filter of one's own ran: the model saw fewer lines than the page has
    index, action, kept, _, total = lines[1].split()
    assert index == "0" and action.startswith("click(") and int(kept) < int(total)
    assert (tmp_path / "runs" / "example" / "run.json").exists()
