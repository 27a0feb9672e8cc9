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

from importlib import metadata as _metadata

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

try:
    __version__ = _metadata.version("linewise")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0"

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
