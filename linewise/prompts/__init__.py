"""Prompt templates, shipped as package data and loaded with importlib.resources.

Templates use ``string.Template`` placeholders (``$goal``), so the braces and
parentheses of page text and code examples need no escaping.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def load_prompt(name: str) -> Template:
    """The template ``prompts/<name>``; raises FileNotFoundError for an unknown name."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return Template(text)


def render_prompt(name: str, **values: object) -> str:
    """Fill a template; every placeholder must be given (KeyError names the missing one)."""
    return load_prompt(name).substitute({k: str(v) for k, v in values.items()}).strip() + "\n"
