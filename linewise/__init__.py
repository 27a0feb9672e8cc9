"""linewise: a runtime for LLM web agents on real Chromium, with filtered observations
and full traces.

The public API is what this module exports (``__all__``, pinned by a test); everything
else is internal and may change. Run tasks with ``run`` (or ``run_sync``), bring your own
model (any object with an async ``complete()``), filter (``register_filter``) and hooks
(``StepHooks``; a ``before_act`` hook runs another action with
``step.replace_action("click('12')")``), and read the traces back with ``read_steps``
and ``read_summary``.
Scripted models and local servers for tests are in ``linewise.testing``.
"""

import importlib
from typing import TYPE_CHECKING, Any

# The public names are imported when first used (PEP 562), not by ``import linewise``:
# every ``linewise`` command imports this package first, and importing the runtime here
# (Playwright, BrowserGym, OpenAI's client, NumPy) made ``linewise --help`` take seconds.
# Type checkers read the imports below; ``_PUBLIC`` says where each name lives, and
# tests/test_public_api.py checks that the two and ``__all__`` agree.
if TYPE_CHECKING:
    from linewise.agent.action_parser import ParsedAction, parse_action
    from linewise.agent.filters.base import FilterInput, FilterResult, ObservationFilter
    from linewise.agent.filters.registry import FilterContext, filter_names, register_filter
    from linewise.agent.models import ChatModel, Completion, Usage
    from linewise.errors import (
        ActionError,
        ActionParseError,
        BrowserCrashed,
        BrowserError,
        BrowserStalled,
        CDPError,
        ConfigError,
        ElementNotFound,
        EndpointRefused,
        EndpointUnreachable,
        GraphBuildError,
        GraphError,
        InvalidResponse,
        LinewiseError,
        LLMError,
        ModelError,
        ObservationError,
        ProgramError,
        PruneError,
        RangeParseError,
        ResponseFormatError,
        TaskFileError,
        TraceWriteError,
    )
    from linewise.records import EpisodeSummary, LLMCall, StepRecord, Tab
    from linewise.runtime.episode import StepContext, StepHooks
    from linewise.runtime.replay.program import Program, load_programs
    from linewise.runtime.replay.skill import Skill, SkillLibrary
    from linewise.runtime.replays import replay, replay_sync
    from linewise.runtime.run import run, run_sync
    from linewise.runtime.tasks.loader import load_task_file
    from linewise.runtime.tasks.schema import (
        AnyTask,
        BrowserGymTask,
        MiniWoBTask,
        SuccessCheck,
        WebTask,
    )
    from linewise.runtime.trace import read_steps, read_summary
    from linewise.settings import (
        AgentSettings,
        BrowserSettings,
        EndpointSettings,
        FilterSettings,
        LinewiseSettings,
    )

    __version__: str

_PUBLIC: dict[str, tuple[str, ...]] = {
    "linewise.agent.action_parser": ("ParsedAction", "parse_action"),
    "linewise.agent.filters.base": ("FilterInput", "FilterResult", "ObservationFilter"),
    "linewise.agent.filters.registry": ("FilterContext", "filter_names", "register_filter"),
    "linewise.agent.models": ("ChatModel", "Completion", "Usage"),
    "linewise.errors": (
        "ActionError", "ActionParseError", "BrowserCrashed", "BrowserError", "BrowserStalled",
        "CDPError", "ConfigError", "ElementNotFound", "EndpointRefused", "EndpointUnreachable",
        "GraphBuildError", "GraphError", "InvalidResponse", "LinewiseError", "LLMError",
        "ModelError", "ObservationError", "ProgramError", "PruneError", "RangeParseError",
        "ResponseFormatError", "TaskFileError", "TraceWriteError",
    ),
    "linewise.records": ("EpisodeSummary", "LLMCall", "StepRecord", "Tab"),
    "linewise.runtime.episode": ("StepContext", "StepHooks"),
    "linewise.runtime.replay.program": ("Program", "load_programs"),
    "linewise.runtime.replay.skill": ("Skill", "SkillLibrary"),
    "linewise.runtime.replays": ("replay", "replay_sync"),
    "linewise.runtime.run": ("run", "run_sync"),
    "linewise.runtime.tasks.loader": ("load_task_file",),
    "linewise.runtime.tasks.schema": (
        "AnyTask", "BrowserGymTask", "MiniWoBTask", "SuccessCheck", "WebTask",
    ),
    "linewise.runtime.trace": ("read_steps", "read_summary"),
    "linewise.settings": (
        "AgentSettings", "BrowserSettings", "EndpointSettings", "FilterSettings",
        "LinewiseSettings",
    ),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then a plain attribute)."""
    if name == "__version__":
        value: Any = _version()
    elif name in _MODULE_OF:
        value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    else:
        raise AttributeError(f"module 'linewise' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("linewise")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0"


__all__ = [
    "ActionError",
    "ActionParseError",
    "AgentSettings",
    "AnyTask",
    "BrowserCrashed",
    "BrowserError",
    "BrowserGymTask",
    "BrowserSettings",
    "BrowserStalled",
    "CDPError",
    "ChatModel",
    "Completion",
    "ConfigError",
    "ElementNotFound",
    "EndpointRefused",
    "EndpointSettings",
    "EndpointUnreachable",
    "EpisodeSummary",
    "FilterContext",
    "FilterInput",
    "FilterResult",
    "FilterSettings",
    "GraphBuildError",
    "GraphError",
    "InvalidResponse",
    "LLMCall",
    "LLMError",
    "LinewiseError",
    "LinewiseSettings",
    "MiniWoBTask",
    "ModelError",
    "ObservationError",
    "ObservationFilter",
    "ParsedAction",
    "Program",
    "ProgramError",
    "PruneError",
    "RangeParseError",
    "ResponseFormatError",
    "Skill",
    "SkillLibrary",
    "StepContext",
    "StepHooks",
    "StepRecord",
    "SuccessCheck",
    "Tab",
    "TaskFileError",
    "TraceWriteError",
    "Usage",
    "WebTask",
    "__version__",
    "filter_names",
    "load_programs",
    "load_task_file",
    "parse_action",
    "read_steps",
    "read_summary",
    "register_filter",
    "replay",
    "replay_sync",
    "run",
    "run_sync",
]
