"""``linewise bench``: task lists × seeds × filters, run headless at scale and resumably.

Modules, one job each:

- ``plan``: which episodes a bench runs (task, seed, filter) and where each one lives.
- ``results``: ``results.jsonl``, the bench's only source of truth (append, flush, fsync).
- ``local``: the asyncio backend (one browser, N episodes at once, per-episode timeout).
- ``ray_backend``: the same episodes as Ray tasks.
- ``progress``: a rich progress bar on a terminal, log lines otherwise.
- ``metrics``: the paper's metrics per group of episodes.
- ``report_data``: the report's numbers and shared table cells; ``report_markdown``,
  ``report_html`` (with ``svg``) render them; ``report`` writes the three files.
- ``cli``: the ``bench`` and ``report`` subcommands.
"""
