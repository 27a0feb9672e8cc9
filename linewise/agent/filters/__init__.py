"""Observation filters: what part of the numbered AXTree the action model is shown.

Every filter takes a ``FilterInput`` (the numbered lines, the goal, the history) and
returns a ``FilterResult`` (the view text plus what it kept and what it cost). They
are chosen by name with ``--filter`` from the registry (``registry.py``): the built-in
none, truncate, embedding, lines, lines+structure, and any registered in code or through
the ``linewise.filters`` entry-point group.
"""
