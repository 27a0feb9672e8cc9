"""A scripted action model for MiniWoB++: reads the prompt, answers as a good model would.

It solves click-test, click-button and enter-text from the goal and the page in the
action prompt (``agent/prompt.py``'s sections), so tests and benchmarks can run whole
episodes with known answers through any ``ChatModel`` or the scripted HTTP server.
"""

from __future__ import annotations

import re
from typing import Any


def prompt_section(prompt: str, title: str) -> str:
    """The text of the ``# title`` section of an action prompt."""
    match = re.search(rf"# {title}\n(.*?)(?:\n# |\nAnswer with|\Z)", prompt, re.DOTALL)
    if match is None:
        raise ValueError(f"the prompt has no '# {title}' section")
    return match.group(1)


def bid_matching(tree: str, pattern: str) -> str:
    """The bid of the first AXTree line that ``pattern`` matches."""
    for line in tree.splitlines():
        if re.search(pattern, line) and (found := re.search(r"\[([a-zA-Z0-9]+)\]", line)):
            return found.group(1)
    raise ValueError(f"no element matching {pattern!r} in:\n{tree}")


def miniwob_solver(messages: list[dict[str, Any]]) -> str:
    """Solves click-test, click-button and enter-text; anything else gets ``noop()``."""
    prompt = messages[1]["content"]
    goal = prompt_section(prompt, "Goal").strip()
    tree = prompt_section(prompt, "Current page")
    history = prompt_section(prompt, "History of your previous steps")
    if goal.startswith("Click the button."):
        return f"<think>One button.</think><action>click('{bid_matching(tree, 'button')}')</action>"
    if m := re.match(r'Click on the "(.+)" button', goal):
        target = bid_matching(tree, rf"button '{re.escape(m.group(1))}'")
        return f"<think>Click {m.group(1)}.</think><action>click('{target}')</action>"
    if m := re.match(r'Enter "(.+)" into the text field and press Submit', goal):
        if "fill(" not in history:
            box = bid_matching(tree, "textbox")
            return f"<think>Type it.</think>\n<action>fill('{box}', '{m.group(1)}')</action>"
        submit = bid_matching(tree, "button .Submit")
        return f"<think>Submit.</think><action>click('{submit}')</action>"
    return "<think>Unknown task.</think><action>noop()</action>"
