"""The public API: what ``import linewise`` offers is pinned, and a hook may replace the
model's action in each public way. The documentation's examples of the API run in
tests/test_docs.py."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import linewise
from linewise.testing import FunctionModel, StaticServer

PUBLIC = [
    "ActionError", "ActionParseError", "AgentSettings", "AnyTask", "BrowserCrashed",
    "BrowserError", "BrowserGymTask", "BrowserSettings", "BrowserStalled", "CDPError",
    "ChatModel", "Completion", "ConfigError", "ElementNotFound", "EndpointRefused",
    "EndpointSettings", "EndpointUnreachable", "EpisodeSummary", "FilterContext",
    "FilterInput", "FilterResult", "FilterSettings", "GraphBuildError", "GraphError",
    "InvalidResponse", "LLMCall", "LLMError", "LinewiseError",
    "LinewiseSettings", "MiniWoBTask", "ModelError", "ObservationError", "ObservationFilter",
    "ParsedAction", "Program", "ProgramError", "PruneError", "RangeParseError",
    "ResponseFormatError", "StepContext",
    "Skill", "SkillLibrary", "StepHooks", "StepRecord", "SuccessCheck", "Tab",
    "TaskFileError", "TraceWriteError", "Usage", "WebTask",
    "__version__", "filter_names", "load_programs", "load_task_file", "parse_action",
    "read_steps", "read_summary", "register_filter", "replay", "replay_sync", "run",
    "run_sync",
]


def test_the_public_names_are_pinned() -> None:
    assert sorted(linewise.__all__) == sorted(PUBLIC)
    for name in linewise.__all__:
        assert getattr(linewise, name) is not None, name


def test_each_public_name_is_its_modules_own_and_imported_on_first_use() -> None:
    """``import linewise`` imports none of them (every command starts with it); each is
    found in the module ``linewise._PUBLIC`` names for it."""
    assert sorted([*linewise._MODULE_OF, "__version__"]) == sorted(PUBLIC)
    for name, module in linewise._MODULE_OF.items():
        assert getattr(linewise, name) is getattr(importlib.import_module(module), name)
    result = subprocess.run(
        [sys.executable, "-c", "import sys, linewise; "
         "print(sorted(m for m in sys.modules if m.startswith(('linewise.', 'playwright'))))"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "[]\n", result.stderr
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        linewise.nothing  # type: ignore[attr-defined]  # noqa: B018


def test_every_public_error_is_a_linewise_error() -> None:
    errors = [getattr(linewise, n) for n in PUBLIC
              if n.endswith(("Error", "Crashed", "Stalled", "Refused", "Response"))
              or n == "ElementNotFound"]
    assert errors and all(issubclass(e, linewise.LinewiseError) for e in errors)


class _Replacing(linewise.StepHooks):
    """Runs its own action instead of the model's, in each public way."""

    async def before_act(self, step: linewise.StepContext) -> None:
        if step.index == 0:
            step.replace_action("noop(10)")  # text, parsed as the model's answers are
        elif step.index == 1:
            step.action = "noop(20)"  # type: ignore[assignment]  # plain text works too
        else:
            with pytest.raises(linewise.ActionParseError):
                step.replace_action("click(")
            step.replace_action(linewise.parse_action("noop(30)"))


def test_a_hook_replaces_the_action_publicly_and_the_summary_knows_its_folder(
    pages: StaticServer, tmp_path: Path
) -> None:
    model = FunctionModel.answering(["<action>click('999')</action>"] * 3)
    task = linewise.WebTask(id="form", url=pages.url("form.html"), goal="Wait", max_steps=3)
    [summary] = linewise.run_sync(task, model=model, filter="none", out_dir=tmp_path,
                                  hooks=[_Replacing()])
    assert summary.directory == tmp_path / "form"
    steps = linewise.read_steps(summary.directory)
    assert [s.action for s in steps] == ["noop(10.0)", "noop(20.0)", "noop(30.0)"]
    assert all(s.action_error is None and s.action_raw == "click('999')" for s in steps)
    # the model is told what ran, not what it proposed
    history = model.requests[1].messages[-1]["content"].split("# History", 1)[1]
    assert "noop(10" in history and "click('999')" not in history
    assert linewise.read_summary(str(summary.directory)).directory == summary.directory
