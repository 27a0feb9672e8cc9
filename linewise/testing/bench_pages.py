"""Local pages for benches under stress, and a script that solves them.

Every page holds a Go button; the task on each is ``GO_GOAL`` (press Go, then report
``done``), which ``go_then_report`` solves in two steps. Two pages carry a stall the
runtime must survive: an iframe whose source Chromium refuses (``file://``: a frame
that never answers), and an ``alert()`` every 30 ms from shortly after load on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from linewise.testing.miniwob_solver import bid_matching, miniwob_solver, prompt_section

GO_GOAL = "Press Go, then report."

PAGES = {
    "plain": "<title>Plain</title><button>Go</button><p>Nothing else here.</p>",
    "refused-iframe": '<button>Go</button><iframe src="file:///etc/hostname"></iframe>',
    "alert-loop": (
        "<button>Go</button><script>window.addEventListener('load', () => "
        "setTimeout(() => setInterval(() => alert('again'), 30), 100));</script>"
    ),
}
"""Page name (served as ``NAME.html``) -> its body."""


def write_pages(root: Path) -> None:
    """Write every page into ``root`` (to be served by a ``StaticServer``)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, body in PAGES.items():
        (root / f"{name}.html").write_text(f"<!doctype html><html><body>{body}</body></html>")


def go_then_report(messages: list[dict[str, Any]]) -> str:
    """Click Go, then report ``done``, on these pages; MiniWoB++ tasks go to
    ``miniwob_solver``."""
    prompt = messages[1]["content"]
    if GO_GOAL not in prompt_section(prompt, "Goal"):
        return miniwob_solver(messages)
    if "click(" not in prompt_section(prompt, "History of your previous steps"):
        tree = prompt_section(prompt, "Current page")
        return f"<think>Go.</think><action>click('{bid_matching(tree, 'button .Go')}')</action>"
    return "<think>Done.</think><action>send_msg_to_user('done')</action>"
