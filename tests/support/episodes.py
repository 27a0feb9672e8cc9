"""One task run to its end on a test's shared browser, the way the runtime runs each
episode of a run (``runtime.run.EpisodeFactory``): the task's environment
(``environment_for``) and the step loop (``run_in_environment``), with the episode's
knobs given as an ``EpisodeConfig`` instead of read from the settings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from linewise.agent.models import ChatModel
from linewise.records import EpisodeSummary
from linewise.runtime.browser.chromium import Browser
from linewise.runtime.envs.factory import environment_for
from linewise.runtime.episode import (
    EpisodeConfig,
    StepHooks,
    episode_directory,
    run_in_environment,
)
from linewise.runtime.run import RunResources
from linewise.runtime.tasks.miniwob_server import MiniWoBServer
from linewise.runtime.tasks.schema import AnyTask


def resources_of(browser: Browser, model: ChatModel,
                 miniwob: MiniWoBServer | None = None) -> RunResources:
    """A run's shared resources on these: no retriever (a filter that needs one gets it
    from its ``EpisodeConfig.make_filter``)."""
    return RunResources(browser, model, None, miniwob)


async def run_episode(
    task: AnyTask,
    resources: RunResources,
    out_dir: Path,
    config: EpisodeConfig | None = None,
    hooks: Sequence[StepHooks] = (),
) -> EpisodeSummary:
    """Run ``task`` to its end with its trace in a fresh folder under ``out_dir``."""
    config = config or EpisodeConfig()
    directory = episode_directory(out_dir, task.id)
    env = environment_for(task, resources.browser, resources.miniwob, config.settle, directory)
    return await run_in_environment(env, task.id, task.max_steps, resources.action_client,
                                    directory, config, hooks)
