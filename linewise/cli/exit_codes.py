"""The exit codes of ``linewise run``, ``linewise bench`` and the other commands
(documented in docs/failures.md, "Exit codes").

- 0: every episode ended with an agent outcome (success or not) or a budget;
- 2: bad input (a task file, a flag, a setting);
- 3: an unusable endpoint (key refused, model unknown, nothing answers at the start) or
  another setup failure (no Chromium, the embedded model cannot start);
- 4: some episode ended on an infrastructure fault, or a bench stopped before its end
  because the endpoint stayed down (``--resume`` runs what is left);
- 5: the output folder could not be written (read-only, full, not allowed): the run
  stopped at once, and the message names the folder, the episode cut short and the
  tasks not run (``errors.TraceWriteError``);
- 6: ``linewise replay`` only: some replay did not succeed (it diverged, or the task's
  own check failed), so a suite of recorded tasks fails when one of them broke;
- 7: ``linewise prune`` and ``linewise memory build`` only: nothing came out of episodes
  that were there (no trajectory made it into the dataset, no memory entry could be
  made); the summary says why;
- 129: stopped by SIGHUP (the terminal was closed, an SSH connection dropped): like
  SIGTERM; the episodes are ``stopped``, a bench is resumable, its report written;
- 130: interrupted (Ctrl+C), or quit at the step-through prompt;
- 141: any command: its output was closed before it ended (``linewise filters | head``);
  it stops quietly, with the code of a command killed by SIGPIPE (128 + 13).
- 143: stopped by SIGTERM (``timeout``, ``docker stop``, CI): like the first Ctrl+C,
  or at once after ``interrupt.TERM_GRACE_S``; the episodes are ``stopped``.
"""

from __future__ import annotations

from collections.abc import Iterable

from linewise.records import Outcome

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_SETUP = 3
EXIT_INFRASTRUCTURE = 4
EXIT_OUTPUT = 5
EXIT_REPLAY_FAILED = 6
EXIT_NOTHING_BUILT = 7
EXIT_HANGUP = 129
"""128 + SIGHUP, as shells report a command stopped by a closed terminal."""
EXIT_INTERRUPTED = 130
"""128 + SIGINT, as shells report a command stopped by Ctrl+C."""
EXIT_OUTPUT_CLOSED = 141
"""128 + SIGPIPE, as shells report a command whose output was closed."""
EXIT_TERMINATED = 143
"""128 + SIGTERM, as shells report a command stopped by SIGTERM."""


def exit_code_for(outcomes: Iterable[Outcome], *, stopped_early: bool = False) -> int:
    """The exit code of a run or bench whose episodes ended with ``outcomes``."""
    seen = set(outcomes)
    if "stopped" in seen:
        return EXIT_INTERRUPTED
    if "infrastructure" in seen or stopped_early:
        return EXIT_INFRASTRUCTURE
    return EXIT_OK
