"""Secrets written into a goal: ``{{secret:VALUE}}`` is a secret of its own.

``linewise run --url … --goal "Sign in with the password {{secret:hunter2}}"`` must not
leave ``hunter2`` in the summary, the steps, the log or ``run.json``. Each marked value
becomes a secret named ``goal_1``, ``goal_2``…: the goal reads ``<secret:goal_1>``
from then on (that is what the model sees and writes), the value is registered with
the redactor at once (the command line is recorded redacted), and it is handed to the
run as an ordinary secret through a variable of this process's environment, scoped to
the task's start origin like any secret without domains.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping

from linewise.runtime.redaction import REDACTOR, placeholder
from linewise.settings import SecretSpec

MARKED = re.compile(r"\{\{secret:(.+?)\}\}", re.DOTALL)
ENV_PREFIX = "LINEWISE_GOAL_SECRET_"


def take_goal_secrets(
    goal: str, environ: MutableMapping[str, str] | None = None
) -> tuple[str, dict[str, SecretSpec]]:
    """``goal`` with each ``{{secret:VALUE}}`` replaced by its placeholder, and the
    secrets' specs by name (the same value marked twice is one secret)."""
    environ = os.environ if environ is None else environ
    names: dict[str, str] = {}
    specs: dict[str, SecretSpec] = {}

    def replace(match: re.Match[str]) -> str:
        value = match.group(1)
        if value not in names:
            number = len(names) + 1
            name, env = f"goal_{number}", f"{ENV_PREFIX}{number}"
            names[value] = name
            environ[env] = value
            REDACTOR.add(value, placeholder(name))
            specs[name] = SecretSpec(env=env)
        return placeholder(names[value])

    return MARKED.sub(replace, goal), specs
