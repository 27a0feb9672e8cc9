"""The ``linewise`` commands: each one's summary line and the module that defines it.

``linewise --help`` lists the commands from this table alone, and ``main`` imports only
the module of the command being run: a command module imports what its command runs
(Playwright, BrowserGym, the model clients), which took seconds before any help was
printed. Each module's ``add_parser(s)`` takes its summary from here (``summary``), so
the list in ``linewise --help`` and the command's own help are one text.

This module imports nothing of linewise's: it is read on every start.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    """The module under ``linewise.cli`` whose ``add_parser`` (or ``add_parsers``, for a
    module with several commands) defines the command."""
    summary: str


COMMANDS: dict[str, Command] = {
    "run": Command("run", "run a task file, or one ad-hoc task with --url/--goal"),
    "replay": Command("replay", "replay recorded episodes with no model call (healed by "
                      "the model where the page changed)"),
    "filter-eval": Command("filter_eval",
                           "score observation filters on saved cases, without an agent"),
    "filters": Command("filters",
                       "list the observation filters (--filter), focus presets and stages"),
    "snapshot": Command("snapshot", "save a page's AXTree as a filter-eval case"),
    "setup": Command("setup",
                     "install Chromium if none is found and assemble the embedded model"),
    "model": Command("setup", "the embedded local model"),
    "bench": Command("bench",
                     "run task lists × seeds × filters headless, resumably, with a report"),
    "report": Command("bench", "write report.md/.html/.json for a bench or improve "
                      "folder, or compare several benches"),
    "prune": Command("prune", "turn recorded traces into pruned fine-tuning data "
                     "(WebClipper)"),
    "mine": Command("prune", "print the necessary action ids of a state graph (Algorithm 1)"),
    "memory": Command("memory", "build or look at an experience memory (--memory)"),
    "skills": Command("skills", "induce skills from solved episodes (--skills)"),
    "retriever": Command("retriever", "build the learned line retriever's data"),
    "improve": Command("improve", "rounds of: bench on training seeds, prune, add the "
                       "successes to an experience memory, bench on test seeds with it"),
    "view": Command("view", "write (or serve) a viewer for an episode, run, bench or "
                    "improve folder, or one index over several benches"),
    "show-trace": Command("show_trace", "open a --playwright-trace chunk "
                          "(<episode>/playwright-trace/step-NNN.zip) in Playwright's trace "
                          "viewer, on the Chromium linewise uses"),
}
"""Every command, in the order ``linewise --help`` lists them."""


def summary(name: str) -> str:
    """The one-line help of command ``name``."""
    return COMMANDS[name].summary
