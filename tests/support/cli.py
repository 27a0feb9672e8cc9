"""The ``linewise`` command run as a user runs it, and a script for the local test pages."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any


def linewise(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> (
    subprocess.CompletedProcess[str]
):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LINEWISE_"))}
    return subprocess.run(
        [sys.executable, "-m", "linewise.cli.main", *args],
        capture_output=True, text=True, timeout=timeout, env={**clean, **(env or {})},
    )


def page_two_script(messages: list[dict[str, Any]]) -> str:
    prompt = messages[1]["content"]
    if "Page two" in prompt.split("# History")[0] and "Go to page two" not in prompt:
        return "<think>Arrived.</think><action>send_msg_to_user('page two reached')</action>"
    for line in prompt.splitlines():
        if "link 'Go to page two'" in line:
            bid = line.split("[", 1)[1].split("]", 1)[0]
            return f"<think>Follow the link.</think><action>click('{bid}')</action>"
    return "<action>noop()</action>"
