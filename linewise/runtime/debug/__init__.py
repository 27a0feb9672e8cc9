"""Watching and steering an agent as it runs: the step-through debugger's hooks
(``stepper``), the box drawn around an action's target (``overlay``), ``--highlight``
(``highlight``), and opening a ``--playwright-trace`` chunk in Playwright's viewer
(``show_trace``). The terminal side of the step-through prompt is ``cli/step_prompt.py``.
"""
