"""Real replay episodes for the report and viewer tests: the reminder task of
tests/runtime/test_replay.py solved by a scripted model on a local page, then replayed
the ways a replay can go (as recorded, from a program file whose recording is gone,
diverged on a renamed button, healed there by a model).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import linewise
from linewise.records import EpisodeSummary
from linewise.runtime.replay.program import load_programs, write_program_file
from linewise.testing import StaticServer
from tests.runtime.test_replay import GOAL, PAGES, healing_model, recording_model


@dataclass
class ReplayEpisodes:
    """One task's episodes, each in its own run folder under ``root``."""

    root: Path
    agent: EpisodeSummary
    """The agent's own run: solved, 4 model calls."""
    replayed: EpisodeSummary
    """Replayed from the agent's folder with no model call."""
    detached: EpisodeSummary
    """Replayed from a program file that names no episode folder (the recording is
    unknown to it)."""
    diverged: EpisodeSummary
    """Replayed with no model after the Send button was renamed: diverged at step 2."""
    healed: EpisodeSummary
    """The same, healed by a model (1 call)."""


def task(server: StaticServer) -> linewise.WebTask:
    return linewise.WebTask(id="remind", url=server.url("index.html"), goal=GOAL,
                            max_steps=8, success={"url_contains": "customer=Alice"})


async def make_replay_episodes(root: Path) -> ReplayEpisodes:
    site = root / "site"
    shutil.copytree(PAGES, site)
    with StaticServer(site) as server:
        [agent] = await linewise.run(task(server), model=recording_model(),
                                     out_dir=root / "agent")
        assert agent.success and agent.outcome == "agent" and agent.directory is not None
        [replayed] = await linewise.replay(agent.directory, heal=False,
                                           out_dir=root / "replayed")
        [program] = load_programs(agent.directory)
        program.source = str(root / "programs" / "remind.json")
        Path(program.source).parent.mkdir()
        write_program_file(program, Path(program.source))
        [detached] = await linewise.replay(program.source, heal=False,
                                           out_dir=root / "detached")
        page = site / "index.html"
        page.write_text(page.read_text().replace("Send reminder", "Send notice"))
        [diverged] = await linewise.replay(agent.directory, heal=False,
                                           out_dir=root / "diverged")
        [healed] = await linewise.replay(agent.directory, model=healing_model(),
                                         out_dir=root / "healed")
    assert (replayed.outcome, replayed.success) == ("replayed", True)
    assert (detached.outcome, detached.success) == ("replayed", True)
    assert (diverged.outcome, diverged.termination) == ("replayed", "diverged")
    assert (healed.outcome, healed.success) == ("healed", True)
    return ReplayEpisodes(root, agent, replayed, detached, diverged, healed)


@pytest.fixture(scope="session")
async def replay_episodes(tmp_path_factory: pytest.TempPathFactory) -> ReplayEpisodes:
    """Made once for the session (five runs, each with its own Chromium): the viewer and
    report tests only read them, and write what they make elsewhere."""
    return await make_replay_episodes(tmp_path_factory.mktemp("replays"))
