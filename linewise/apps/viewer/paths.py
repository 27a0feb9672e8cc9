"""Where the viewer's files go, relative to ``view/`` (the one place links are made)."""

from __future__ import annotations

VIEW_DIR = "view"
"""The viewer's folder inside the folder it shows."""

SINGLE_EPISODE = "."
"""The relative path of an episode folder that is itself the folder shown."""


def episode_key(rel: str) -> str:
    """A file name for the episode at ``rel`` (its path under the folder shown)."""
    if rel in ("", SINGLE_EPISODE):
        return "episode"
    return rel.strip("/").replace("/", "__")


def episode_page(rel: str) -> str:
    """The episode's page, relative to ``view/``."""
    return f"episodes/{episode_key(rel)}.html"


def data_dir(rel: str) -> str:
    """The folder of the episode's data scripts, relative to ``view/``."""
    return f"data/{episode_key(rel)}"


def step_script(index: int) -> str:
    return f"step-{index:03d}.js"


def from_view(rel: str, path_in_episode: str) -> str:
    """A file of the episode (a screenshot) as seen from ``view/``."""
    if rel in ("", SINGLE_EPISODE):
        return f"../{path_in_episode}"
    return f"../{rel.strip('/')}/{path_in_episode}"
