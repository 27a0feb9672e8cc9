"""The memory a run's settings name, loaded once per file version, and the leak check."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path

from linewise.agent.experience.retrieve import ExperienceMemory
from linewise.agent.experience.store import MemoryEntry, TaskKey, overlapping, read_memory
from linewise.agent.text.embedders import make_embedder
from linewise.errors import ConfigError
from linewise.settings import LinewiseSettings


def memory_for(settings: LinewiseSettings) -> ExperienceMemory | None:
    """The memory of ``settings.agent.memory`` (None when unset), ranked with the
    embedder of ``settings.filter``'s embedding settings."""
    path = settings.agent.memory
    if path is None:
        return None
    return _memory(_version(path), settings.agent.memory_k,
                   settings.agent.memory_budget_tokens, settings.filter.embedding_base_url,
                   settings.filter.embedding_model, settings.action.api_key)


@cache
def _memory(version: tuple[Path, int, int], k: int, budget_tokens: int,
            embedding_base_url: str | None, embedding_model: str | None,
            api_key: str | None) -> ExperienceMemory:
    """One memory (and embedder) per file version and settings: a bench asks for it once
    per episode, and its entries' index and embedder need not be made again."""
    embedder = make_embedder(embedding_base_url, embedding_model, api_key=api_key)
    return ExperienceMemory(_entries(*version), k=k, budget_tokens=budget_tokens,
                            embedder=embedder)


def _version(path: Path) -> tuple[Path, int, int]:
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"--memory {path}: {exc.strerror or exc}") from exc
    return path.resolve(), stat.st_mtime_ns, stat.st_size


@cache
def _entries(path: Path, mtime_ns: int, size: int) -> list[MemoryEntry]:
    """A memory file read once per version (a bench makes an episode config per episode)."""
    return read_memory(path)


def memory_overlap(settings: LinewiseSettings, keys: Iterable[TaskKey]) -> list[TaskKey]:
    """The episodes among ``keys`` that the run's memory was built from (none without one)."""
    path = settings.agent.memory
    if path is None:
        return []
    return overlapping(_entries(*_version(path)), keys)


def check_memory_leak(
    settings: LinewiseSettings, keys: Iterable[TaskKey], *, allow: bool = False
) -> list[TaskKey]:
    """Refuse a memory built from the episodes being run (a benchmark would leak its
    answers into its own test); with ``allow`` (training runs), return them to be flagged.

    Raises:
        ConfigError: some episode of ``keys`` is in the memory and ``allow`` is False.
    """
    shared = memory_overlap(settings, keys)
    if shared and not allow:
        named = ", ".join(f"{k.task} seed {k.seed}" for k in shared[:5])
        more = f" and {len(shared) - 5} more" if len(shared) > 5 else ""
        raise ConfigError(
            f"memory {settings.agent.memory} was built from episodes this run tests on "
            f"({named}{more}): test on other seeds, or build the memory without them "
            "(bench --allow-memory-overlap runs anyway and flags it)")
    return shared
