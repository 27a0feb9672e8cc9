"""One view across runs: several bench folders side by side, and an improve folder's
rounds, as one report and one viewer index (what AgentLab calls a study).

Modules, one job each:

- ``benches``: the folders compared, each read once (results, state, plan) and
  labelled; an improve folder's round benches.
- ``data``: the comparison's numbers (``Comparison``): per bench, per agent and filter
  within it, per task, and where the benches differ.
- ``tables``: the cells its renderings share; ``markdown``, ``html``: its renderings;
  ``report`` writes them, with each bench's own report, into ``--out``.
- ``index``: the viewer index over several benches (or an improve folder's rounds),
  linking to each bench's own episode pages.
"""
