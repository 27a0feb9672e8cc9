"""The ``focus`` filter's candidate stages: one object each, in one list.

A stage is a :class:`Stage`: its name, what it proposes (for the documentation and
``linewise filters``), how many groups it may add per turn of the token budget, whether
its best groups are kept in the view whatever the model chooses, what it needs beyond
the page (the retriever, an embedder) and the function that proposes its groups.
:data:`FOCUS_STAGES` lists them in the order they propose and take their turns
(:func:`.budget.fill_budget`); a stage reads the groups of the stages before it.

A new stage: its ``Stage`` here, the function it calls (in its own module of this
package), and its test. The presets (:mod:`.presets`) name which stages run.

This module is read by every ``--focus-stages`` help: it imports what a stage runs only
when the stage runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from linewise.agent.filters.base import FilterInput
    from linewise.agent.filters.stages.context_embedding import UnitIndex
    from linewise.agent.filters.stages.groups import Group
    from linewise.agent.filters.stages.page_index import PageIndex
    from linewise.agent.filters.stages.query_expansion import Expansion, QueryExpander
    from linewise.agent.filters.view.page_diff import PageDiff
    from linewise.agent.filters.view.tree import LineTree
    from linewise.agent.text.embedders import Embedder

__all__ = ["ALWAYS", "FOCUS_STAGES", "Stage", "StageRun"]

Needs = Literal["retriever", "embedder"]


@dataclass
class StageRun:
    """One step's page, as every stage proposes from it."""

    observation: FilterInput
    tree: LineTree
    page: PageIndex
    """The page's index (BM25 ranker, outline, units, entries), kept across steps."""
    previous: list[str] | None
    """Last step's lines (None on the first step)."""
    diff: PageDiff | None
    context: int
    """Lines kept either side of a hit."""
    top_k: int
    """How many blocks or chunks the embedding stages propose."""
    groups: dict[str, list[Group]] = field(default_factory=dict)
    """What the stages before proposed, by stage."""
    expander: QueryExpander | None = None
    embedder: Embedder | None = None
    units: UnitIndex | None = None
    """The episode's embedded units (the ``units`` stage)."""
    expansion: Expansion | None = None
    """Set by the ``expansion`` stage: the terms the retriever named."""


Propose = Callable[[StageRun], Awaitable["list[Group] | None"]]
"""A step's page in, the stage's groups out (best first); None when it could not run."""


@dataclass(frozen=True)
class Stage:
    name: str
    description: str
    """What it proposes, as ``linewise filters`` and docs/filters.md show it."""
    propose: Propose
    turns: int = 0
    """Groups it may add per turn of the budget; 0 for the guard, taken whole first."""
    top: bool = False
    """Its first groups taken (``FocusConfig.keep_top_lexical``) are kept in the view
    whatever the model chooses."""
    needs: Needs | None = None
    """It runs only when the filter has this (``expansion``: the retriever)."""


async def _guard(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.candidates import guard_groups

    return guard_groups(run.tree, run.observation)


async def _named(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.candidates import named_groups

    return named_groups(run.tree, run.page.ranker, run.observation, context=run.context)


async def _followed(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.followed import history_groups
    from linewise.agent.filters.stages.groups import Group

    page = run.page
    return [Group("followed", g) for g in history_groups(
        run.tree, page.ranker, run.observation, context=run.context,
        passages=(page.units, page.passage_ranker))]


async def _lexical(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.candidates import lexical_groups

    return lexical_groups(run.observation.lines, run.observation, context=run.context,
                          ranker=run.page.ranker)


async def _passages(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.passages import passage_groups

    return passage_groups(run.page.units, run.page.passage_ranker, run.observation,
                          len(run.observation.lines))


async def _expansion(run: StageRun) -> list[Group] | None:
    from linewise.agent.filters.stages.groups import Group
    from linewise.agent.filters.stages.term_match import term_groups

    if run.expander is None:
        return None
    run.expansion = await run.expander.expand(run.observation)
    return [Group("expansion", g) for g in term_groups(
        run.tree, run.page.ranker, run.expansion.terms, context=run.context)]


async def _outline(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.candidates import outline_groups

    return outline_groups(run.observation.lines, run.page.outline)


async def _referred(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.candidates import referred_groups

    return referred_groups(run.tree, run.page.entries, run.groups, context=run.context)


async def _changed(run: StageRun) -> list[Group]:
    from linewise.agent.filters.stages.candidates import changed_groups

    return changed_groups(run.previous, run.observation.lines, diff=run.diff)


async def _units(run: StageRun) -> list[Group] | None:
    from linewise.agent.filters.stages.context_embedding import unit_groups

    if run.embedder is None or run.units is None:
        return None
    return await unit_groups(run.units, run.tree, run.observation, top_k=run.top_k)


async def _embedding(run: StageRun) -> list[Group] | None:
    from linewise.agent.filters.stages.candidates import embedding_groups

    if run.embedder is None:
        return None
    return await embedding_groups(run.embedder, run.tree, run.observation, top_k=run.top_k)


ALWAYS = "guard"
"""The stage that always runs: the recall guard's elements must be in every view."""

FOCUS_STAGES: tuple[Stage, ...] = (
    Stage(ALWAYS, "the focused element and the elements the last actions and error named "
          "(always on)", _guard),
    Stage("named", "lines whose names hold what the goal quotes or names in code "
          "(`'Submit'`, `json.loads`, `--malloc-fill`)", _named, turns=2, top=True),
    Stage("followed", "the section an in-page link of the last action opened, and the "
          "neighbourhood of the element it named", _followed, turns=3, top=True),
    Stage("lexical", "BM25 hits on goal + recent actions + thoughts, ± 2 lines", _lexical,
          turns=3, top=True),
    Stage("passages", "BM25 hits on whole blocks read with what they belong to (a term "
          "with its definition, a row, a list item)", _passages, turns=2),
    Stage("expansion", "the retriever reads only the goal and history and names the words "
          "the needed element likely shows (`City` for \"the town I live in\"): their BM25 "
          "hits (one short call per new history; needs the retriever)", _expansion,
          turns=3, top=True, needs="retriever"),
    Stage("outline", "search boxes, dialogs, headings, landmarks, form fields, tabs, table "
          "headers, terms", _outline, turns=2),
    # referred comes late: an entry it brings is a whole term with its definition, whose
    # item can crowd out the sections the goal's own words found
    Stage("referred", "the entries (terms, headings) that the best lines of the "
          "word-matching stages mention by name", _referred, turns=1),
    Stage("changed", "runs of lines that changed since the last step", _changed, turns=1),
    Stage("units", "the page's blocks, each with its term, heading or row, scored by the "
          "embedder (offline MiniLM unless one is configured; seconds per new large page)",
          _units, turns=2, needs="embedder"),
    Stage("embedding", "100-token chunks most similar to the query, with their anchor "
          "(only when an embedder is configured: LINEWISE_FILTER__EMBEDDING_*)", _embedding,
          turns=2, needs="embedder"),
)
"""Every stage, in the order they propose and take their turns in the budget."""
