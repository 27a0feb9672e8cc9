"""Watching and steering an agent as it runs: the step-through debugger's hooks
(``stepper``), the box drawn around an action's target (``overlay``) and ``--highlight``
(``highlight``). The terminal side of the step-through prompt is ``cli/step_prompt.py``.
"""
