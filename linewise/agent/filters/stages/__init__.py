"""The ``focus`` filter's candidate stages and their presets.

:mod:`.catalog` is the one list of stages: each stage is one object holding its name,
its description, its turns in the token budget and how it proposes lines.
:mod:`.presets` names configurations of them. The other modules propose the lines:
:mod:`.candidates` (groups and the budget), :mod:`.term_match`, :mod:`.passages`,
:mod:`.followed`, :mod:`.context_embedding`, :mod:`.query_expansion`, over the page's
index (:mod:`.page_index`).
"""
