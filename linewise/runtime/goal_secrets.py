"""Secrets written into a goal: ``{{secret:VALUE}}`` is a secret of its own.

``linewise run --url … --goal "Sign in with the password {{secret:hunter2}}"``, or a task
file's ``goal:`` written the same way, must not leave ``hunter2`` in the summary, the
steps, the prompts, the log or ``run.json``. Each marked value becomes a secret named
``goal_1``, ``goal_2``…: the goal reads ``<secret:goal_1>`` from then on (that is what
the model sees and writes), the value is registered with the redactor at once (the
command line is recorded redacted), and it is handed to the run as an ordinary secret,
scoped to the task's start origin like any secret without domains. Its value is kept
inside this process under a variable name of its own (``secret_env.py``), never put
into the environment, where Chromium and every other child process would inherit it.
"""

from __future__ import annotations

import re

from linewise.runtime import secret_env
from linewise.runtime.redaction import MARKED, REDACTOR, placeholder
from linewise.settings import SecretSpec

__all__ = ["ENV_PREFIX", "MARKED", "GoalSecrets", "take_goal_secrets"]

ENV_PREFIX = "LINEWISE_GOAL_SECRET_"


class GoalSecrets:
    """Numbers the values marked in one run's goals: the same value is one secret
    wherever it is marked, another value the next ``goal_N``."""

    def __init__(self) -> None:
        self._secrets: dict[str, tuple[str, str]] = {}
        """Each value's secret name and the variable name its value is kept under."""

    def take(self, goal: str) -> tuple[str, dict[str, SecretSpec]]:
        """``goal`` with each ``{{secret:VALUE}}`` replaced by its placeholder, and the
        specs of the secrets it marks, by name."""
        specs: dict[str, SecretSpec] = {}

        def replace(match: re.Match[str]) -> str:
            value = match.group(1)
            if value not in self._secrets:
                number = len(self._secrets) + 1
                self._secrets[value] = f"goal_{number}", f"{ENV_PREFIX}{number}"
                secret_env.remember(self._secrets[value][1], value)
                REDACTOR.add(value, placeholder(self._secrets[value][0]))
            name, env = self._secrets[value]
            specs[name] = SecretSpec(env=env)
            return placeholder(name)

        return MARKED.sub(replace, goal), specs


def take_goal_secrets(goal: str) -> tuple[str, dict[str, SecretSpec]]:
    """``goal`` with each ``{{secret:VALUE}}`` replaced by its placeholder, and the
    secrets' specs by name (the same value marked twice is one secret)."""
    return GoalSecrets().take(goal)
