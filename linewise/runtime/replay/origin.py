"""The agent episode a replay stands for: what its program cost the model to find.

A program's ``source`` is the episode folder it was recorded from, or a program file
(``linewise replay --update`` writes ``program.json`` inside that folder). That episode
may itself have been a replay (the replay cache keeps the program of a successful replay
in place of the old one): its own program's source is then followed, back to the
episode the agent solved. The model calls and tokens of that episode are what a replay
of it saves (``apps/bench`` reports them).
"""

from __future__ import annotations

from pathlib import Path

from linewise.errors import DamagedTraceError
from linewise.records import EpisodeSummary
from linewise.runtime.trace import read_summary

MAX_HOPS = 16
"""Replays of replays followed at most: a longer chain is not looked through."""


def episode_folder_of(source: str) -> Path | None:
    """The episode folder a program's ``source`` names, if it is there: the folder
    itself, or the folder a ``program.json`` lies in."""
    path = Path(source)
    folder = path.parent if path.suffix == ".json" else path
    return folder if (folder / "summary.json").is_file() else None


def recorded_run(source: str) -> EpisodeSummary | None:
    """The summary of the agent's own episode that a program from ``source`` was
    recorded from (through replays of it), or None when it cannot be found: the folder
    is gone or damaged, or the chain ends in an episode that was not the agent's alone
    (a person assisted it, say)."""
    seen: set[Path] = set()
    for _ in range(MAX_HOPS):
        folder = episode_folder_of(source)
        if folder is None or folder.resolve() in seen:
            return None
        seen.add(folder.resolve())
        try:
            summary = read_summary(folder)
        except (OSError, DamagedTraceError):
            return None
        if summary.outcome == "agent":
            return summary
        if summary.replay is None:
            return None
        source = summary.replay.program
    return None
