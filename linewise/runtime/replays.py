"""Running programs: the library's ``replay`` and ``linewise replay``.

A replay is an ordinary run whose episodes follow a recorded program
(``runtime/replay``): the same browser, navigation policy, secrets, budgets and trace
files as any run, each step marked ``replayed`` or ``healed``. Without a model
(``heal=False``) nothing is ever asked of one, and none is started: a step that does
not fit the page ends its episode ``diverged``, naming the step and the reason.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import structlog

from linewise.agent.models import ChatModel, Completion
from linewise.errors import ConfigError, ProgramError
from linewise.records import EpisodeSummary
from linewise.runtime.log import configure_logging
from linewise.runtime.replay.program import (
    PROGRAM_FILE,
    Program,
    load_programs,
    program_from_episode,
    write_program_file,
)
from linewise.runtime.run import default_out_dir, run_tasks
from linewise.settings import LinewiseSettings

log = structlog.get_logger(__name__)


class NoModel:
    """The action model of a replay without one: never asked (the replay stops where it
    would be), and an error if it were."""

    model = "none (replay)"

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        raise ConfigError("a replay without a model asked for one: this is a bug")


async def replay(
    path: str | os.PathLike[str],
    *,
    model: ChatModel | None = None,
    heal: bool = True,
    update: bool = False,
    settings: LinewiseSettings | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    argv: list[str] | None = None,
    stop: asyncio.Event | None = None,
) -> list[EpisodeSummary]:
    """Replay every program ``path`` holds (a program file, an episode folder, a run or
    bench folder, or a pruned dataset) on a fresh load of its task's start page.

    ``heal``: a step whose element is not found uniquely, or whose effect is not the
    recorded one, goes to ``model`` (or the endpoints of ``settings``, or the embedded
    model); without it no model is started or asked. ``update``: a healed program that
    succeeded is written back (over its program file, or as ``program.json`` in the
    episode folder it came from), so the next replay needs no model there.

    Raises:
        ProgramError: ``path`` holds nothing to replay, or a damaged program.
    """
    if not structlog.is_configured():
        configure_logging(level="WARNING")
    programs = load_programs(path)
    tasks = [program.make_task() for program in programs]
    chosen = settings if settings is not None else LinewiseSettings().resolved()
    summaries = await run_tasks(
        tasks, chosen, Path(out_dir) if out_dir is not None else default_out_dir(),
        action_model=model if heal else (model or NoModel()),
        filter=None if heal else "none", argv=argv or sys.argv, stop=stop,
        programs=programs, heal=heal,
    )
    if update:
        for program, summary in zip(programs, summaries, strict=False):
            write_healed(program, summary)
    return summaries


def write_healed(program: Program, summary: EpisodeSummary) -> Path | None:
    """Write the program of a healed episode that succeeded back where ``program`` came
    from; the path written, or None when there was nothing to write."""
    if summary.outcome != "healed" or not summary.success or summary.directory is None:
        return None
    try:
        healed = program_from_episode(summary.directory)
    except ProgramError as exc:
        log.warning("healed program not written", reason=str(exc))
        return None
    source = Path(program.source)
    target = source if source.suffix == ".json" else source / PROGRAM_FILE
    healed.source = str(target)
    write_program_file(healed, target)
    log.info("healed program written", path=str(target))
    return target


def replay_sync(path: str | os.PathLike[str], **options: Any) -> list[EpisodeSummary]:
    """``replay`` for code without an event loop of its own (same arguments)."""
    return asyncio.run(replay(path, **options))
