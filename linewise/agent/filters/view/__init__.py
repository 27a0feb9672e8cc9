"""The view and its rendering: the page as a tree of lines and the smaller trees drawn
from kept lines.

- :mod:`.tree`: the numbered lines as a tree (depth, parent, subtree end, bid lines);
- :mod:`.render`: kept lines copied with counted markers for what was dropped;
- :mod:`.structure`: kept lines rebuilt as a valid smaller tree, with their ancestors;
- :mod:`.items`: a kept line widened to its enclosing item, within a budget;
- :mod:`.outline`: the page's landmarks (search boxes, dialogs, headings, fields…);
- :mod:`.page_diff`: what changed between two steps' pages;
- :mod:`.ranges`: line ranges, parsed and merged.

It imports nothing else of ``agent.filters``.
"""
