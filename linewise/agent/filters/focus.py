"""``focus``: candidates first, then (optionally) the retriever model chooses among them.

Per step:

1. the configured stages (``FocusConfig.stages``, described in :mod:`.stages.presets`)
   propose candidate lines (:mod:`.stages.candidates`: the recall guard's elements, BM25 hits,
   the page outline, the lines that changed, expanded-query and embedding hits…) until
   a fixed token budget is full;
2. with ``chooser="model"``, the retriever model reads ONLY those lines, in page order
   with their original numbers, plus a compact outline of the rest (role and shortened
   name), and answers line ranges as the ``lines`` retriever does. Its input never
   exceeds ``budget_tokens``, whatever the page's size, so a step's time is bounded.
   With ``chooser="none"`` the candidates themselves are the selection;
3. the view is the selection, the best lexical hits and the guarded elements in the
   structure-preserving tree (with ``items``, each kept line with its enclosing item).
   An unusable answer (after retries) leaves the candidates themselves as the
   selection, recorded in ``notes["candidates_fallback"]``.

Named configurations (presets) are in :mod:`.stages.presets`; ``FocusConfig.from_preset``
builds one.

When the agent got stuck on last step's view (:mod:`.retriever.escalation`), the next step shows
more: level 1 shows every candidate of a budget ``escalation_factor`` times larger
without asking the model; level 2 the whole tree. On an unchanged page the previous
selection is reused without a model call, unless the agent got stuck on it; on a page
that changed little it is carried over, with the changed lines and the best lexical
hits, also without a model call (:mod:`.incremental`). The page's structures (tree,
roles, outline, BM25 index) are built once per page and taken over line by line by the
next step's page (:mod:`.stages.page_index`).

``notes`` records which stage proposed which lines (``stages``), the stages that ran
(``stages_run``), the retriever's input tokens (``retriever_input_tokens``) and the
escalation decision.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import structlog
from pydantic import BaseModel, Field, field_validator

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.filters.incremental import CarryOver
from linewise.agent.filters.retriever.defend import (
    InjectionMemory,
    defend_system,
    injection_ranges,
    without_injections,
)
from linewise.agent.filters.retriever.escalation import Escalation, EscalationState
from linewise.agent.filters.retriever.ranges_answer import (
    ranges_answer_format,
    ranges_constraint,
    ranges_reask,
)
from linewise.agent.filters.retriever.recall_guard import guard_lines, guarded_bids
from linewise.agent.filters.stages.budget import MARKER_TOKENS, fill_budget, numbered_sizes
from linewise.agent.filters.stages.catalog import ALWAYS, FOCUS_STAGES, StageRun
from linewise.agent.filters.stages.context_embedding import UnitIndex
from linewise.agent.filters.stages.followed import history_groups
from linewise.agent.filters.stages.groups import CandidateSet
from linewise.agent.filters.stages.page_index import PageIndex
from linewise.agent.filters.stages.presets import (
    DEFAULT_STAGES,
    Chooser,
    check_stages,
    get_preset,
)
from linewise.agent.filters.stages.query_expansion import Expansion, QueryExpander
from linewise.agent.filters.stages.shares import reserved_lines
from linewise.agent.filters.view.items import expand_items
from linewise.agent.filters.view.outline import by_priority
from linewise.agent.filters.view.page_diff import PageDiff, diff_pages
from linewise.agent.filters.view.ranges import (
    Range,
    lines_of,
    merge_ranges,
    parse_ranges,
    raw_ranges,
)
from linewise.agent.filters.view.render import line_ranges, render_with_markers
from linewise.agent.filters.view.structure import rebuild_with_structure
from linewise.agent.filters.view.tree import LineTree
from linewise.agent.models import ChatModel
from linewise.agent.structured import ask_structured, will_constrain
from linewise.agent.text.embedders import Embedder
from linewise.agent.text.learned import TrainedReranker
from linewise.axtree import bid_of
from linewise.errors import ConfigError, LLMError, ModelError, RangeParseError
from linewise.prompts import render_prompt
from linewise.records import LLMCall
from linewise.tokens import count_message_tokens, count_tokens

log = structlog.get_logger(__name__)

__all__ = ["FocusConfig", "FocusFilter"]


class FocusConfig(BaseModel):
    stages: tuple[str, ...] = Field(
        default=DEFAULT_STAGES, description="The candidate stages that run "
        "(:data:`.stages.presets.STAGES`); ``guard`` always does. ``expansion`` needs the "
        "filter's expander, ``units`` its embedder; ``embedding`` runs when it has one."
    )
    chooser: Chooser = Field(
        default="model", description="``model``: the retriever chooses among the "
        "candidates; ``none``: the candidates are the view (no model call)."
    )
    budget_tokens: int = Field(
        default=4000, ge=500, description="The retriever's whole input (prompt, candidates "
        "and outline), whatever the page's size."
    )
    outline_share: float = Field(
        default=0.2, ge=0, le=0.9, description="Part of the observation's room kept for "
        "the compact outline of the lines not among the candidates."
    )
    answer_tokens: int = 384
    max_retries: int = Field(default=1, ge=0)
    json_schema: Literal["auto", "on", "off"] = "auto"
    defend: bool = False
    """Defender mode (agent/filters/retriever/defend.py); small pages are then asked about too."""
    lexical_context: int = Field(default=2, ge=0)
    keep_top_lexical: int = Field(
        default=3, ge=0, description="The best lexical hits kept in the view whatever the "
        "model chooses: a small model's miss must not hide a named element."
    )
    embedding_top_k: int = 10
    escalation_factor: float = Field(default=3.0, ge=1.0)
    escalation_budgets: tuple[int, ...] | None = Field(
        default=None, description="The candidate budget of each escalation level (1, 2…; "
        "the last one serves higher levels): a stuck step is shown every candidate within "
        "it, never the whole tree. None: level 1 is ``escalation_factor`` × "
        "``budget_tokens`` and level 2 the whole tree. ``auto`` sets multiples of the "
        "action model's view budget, so that a small model's stuck step stays readable."
    )
    pad_lines: int = Field(default=1, ge=0)
    incremental: bool = Field(
        default=True, description="Reuse the previous selection on an unchanged page and, "
        "with a retriever model, carry it over to a page that changed little "
        "(:mod:`.incremental`), unless the agent got stuck on it."
    )
    carry_over_tokens: int = Field(
        default=500, ge=0, description="A page 'changed little' when the lines that changed "
        "since the model last chose hold at most this many tokens (summed over the steps "
        "carried since) and at most ``carry_over_share`` of the page's tokens: about what "
        "one click changes (a focus, a message, a menu), a tenth of what the model reads. "
        "The changed lines are shown whole, so this also bounds the view's growth."
    )
    carry_over_share: float = Field(default=0.1, ge=0, le=1, description="See "
                                    "``carry_over_tokens``: the bound relative to the page.")
    carry_over_steps: int = Field(
        default=3, ge=0, description="Steps in a row carried over before the model is asked "
        "again. The model chose for a shorter history: lexical hits follow the new actions' "
        "words, but a need stated in other words (the next step of a task) has none, so "
        "the choice is refreshed every few steps even on a page that barely moves."
    )
    min_page_tokens: int = Field(
        default=2000, ge=0, description="A smaller tree is shown whole: a retriever call "
        "costs more time than the action model saves on it."
    )
    items: bool = Field(
        default=False, description="Keep each chosen line's enclosing item whole (its "
        "article, row, list item, term and definition, form group or heading section), "
        "within the view budget (:mod:`.view.items`)."
    )
    item_max_lines: int = Field(default=40, ge=1, description="A longer item keeps only "
                                "its head and its controls nearest to the chosen line.")
    view_budget_tokens: int = Field(
        default=6000, ge=500, description="With ``items``: the most tokens the action "
        "model's view may hold (it is not the retriever's input)."
    )
    view_max_share: float = Field(
        default=0.3, gt=0, le=1, description="With ``items``: the view holds at most this "
        "share of the page's tokens, so item expansion never undoes the filter's cut."
    )
    reserve_share: float = Field(
        default=0.0, ge=0, le=1, description="With ``items`` and no model choice: this "
        "share of the view budget holds the candidates' own lines, round-robin across the "
        "stages, before any item is added (:mod:`.stages.shares`), so one stage's long items "
        "cannot push out another stage's best hits."
    )

    @field_validator("stages", mode="before")
    @classmethod
    def _known_stages(cls, value: Any) -> Any:
        """Canonical order, ``guard`` added; an unknown name is a ConfigError."""
        return check_stages([value] if isinstance(value, str) else value)

    @classmethod
    def from_preset(cls, name: str, **knobs: Any) -> FocusConfig:
        """The configuration of the preset ``name`` (:data:`.stages.presets.PRESETS`), with
        ``knobs`` (``stages`` among them) on top."""
        preset = get_preset(name)
        return cls(**{"stages": preset.stages, "chooser": preset.chooser,
                      "items": preset.items, "reserve_share": preset.reserve_share, **knobs})

    def runs(self, stage: str) -> bool:
        return stage in self.stages


class _Prompt(BaseModel):
    numbered: str
    """The observation part: numbered lines, shortened outline lines and markers."""
    messages: list[dict[str, Any]]
    shown: set[int]
    """0-based lines the model may choose (candidates and outline lines shown)."""
    tokens: int
    outline_lines: int


def within_budget(draw: Callable[[list[int]], _Prompt], lines: list[int],
                  budget: int) -> _Prompt:
    """``draw(lines)``, with the last quarter of ``lines`` dropped until the prompt fits
    ``budget`` tokens (or no line is left to drop): the prompts are fitted by estimate
    first, and this mends an estimate that missed."""
    prompt = draw(lines)
    while prompt.tokens > budget and lines:
        lines = lines[: len(lines) * 3 // 4]
        prompt = draw(lines)
    return prompt


class FocusFilter:
    """Candidates, then the retriever chooses. One instance per episode."""

    user_prompt = "focus_user.md"
    """The retriever's instructions and page (a template in ``linewise/prompts``)."""

    def __init__(
        self, model: ChatModel | None, config: FocusConfig | None = None,
        embedder: Embedder | None = None, *, name: str = "focus",
        expander: QueryExpander | None = None, reranker: TrainedReranker | None = None,
    ) -> None:
        """The configuration decides what runs: ``model`` is the chooser of
        ``chooser="model"`` (required then, unused otherwise), ``expander`` asks for the
        terms of the ``expansion`` stage (required with it), ``embedder`` serves the
        ``units`` stage (required with it) and the ``embedding`` stage (which runs only
        when there is one), and ``reranker``, when given, reorders the ``units`` stage's
        best units."""
        self.name = name
        self.config = config = config or FocusConfig()
        missing = [what for what, needed, given in (
            ("a retriever model (chooser 'model')", config.chooser == "model", model),
            ("an expander (stage 'expansion')", config.runs("expansion"), expander),
            ("an embedder (stage 'units')", config.runs("units"), embedder),
        ) if needed and given is None]
        if missing:
            raise ConfigError(f"the {name} filter needs {' and '.join(missing)}")
        self.model = model if config.chooser == "model" else None
        if not (config.runs("units") or config.runs("embedding")):
            embedder = None
        self.embedder = embedder
        self.escalation = Escalation()
        self._previous_kept: set[int] | None = None
        self.defense = InjectionMemory() if self.config.defend else None
        self._named: list[Range] = []
        self._units = (UnitIndex(embedder, reranker=reranker) if embedder is not None
                       else None)
        self.expander = expander if config.runs("expansion") else None
        self._expansion: Expansion | None = None
        self._page: PageIndex | None = None
        self._carry = CarryOver()
        self._embedding_error: str | None = None
        """Why the embedding stage did not run this step (or, once the embedder cannot
        load, for the rest of the episode)."""

    async def apply(self, observation: FilterInput) -> FilterResult:
        result = await self._apply(observation)
        if self.defense is None:
            return result
        named = self.defense.remember(observation.lines, self._named)
        self._named = []
        return without_injections(observation, result, self.defense, named, structure=True)

    def _candidate_budget(self, level: int) -> int:
        """The candidates' token budget at an escalation level (0: not stuck)."""
        if not level:
            return self.config.budget_tokens
        if (budgets := self.config.escalation_budgets) is not None:
            return budgets[min(level, len(budgets)) - 1]
        return int(self.config.budget_tokens * self.config.escalation_factor)

    async def _apply(self, observation: FilterInput) -> FilterResult:
        started = time.perf_counter()
        lines = observation.lines
        state = self.escalation.update(observation)
        previous_lines = self.escalation.previous.lines if self.escalation.previous else None
        notes: dict[str, object] = {"escalation": state.model_dump()}
        if observation.full_tokens < self.config.min_page_tokens and not self.config.defend:
            notes["small_page"] = True
            return self._whole(observation, started, notes)
        if not lines or (state.level >= self.escalation.max_level
                         and self.config.escalation_budgets is None):
            return self._whole(observation, started, notes)
        page = self._page_of(lines)
        tree = page.tree
        diff = (diff_pages(previous_lines, lines)
                if previous_lines is not None and not state.page_unchanged else None)
        calls: list[LLMCall] = []
        if (self.config.incremental and state.page_unchanged and not state.reasons
                and self._previous_kept is not None):
            kept = set(self._previous_kept)
            notes["incremental"] = "unchanged page: previous selection reused"
        elif (carried := self._carried(observation, page, diff, state, notes)) is not None:
            kept = carried
        else:
            budget = self._candidate_budget(state.level)
            candidates = await self._candidates(observation, tree, previous_lines, budget, diff)
            notes["stages"] = candidates.by_stage
            notes["stages_run"] = candidates.ran
            notes["candidate_lines"] = len(candidates.lines)
            self._carry.chosen()
            if state.level:
                kept = set(candidates.lines)
                notes["escalation_view"] = "every candidate, no model call"
            else:
                kept, calls = await self._choose(observation, tree, candidates, notes)
                kept |= set(candidates.top_lexical)
                if self.config.items:
                    kept = self._with_items(observation, tree, candidates, kept, notes)
        if self._expansion is not None:
            calls = [*self._expansion.calls, *calls]
            notes["expansion"] = {"terms": self._expansion.terms,
                                  "reused": self._expansion.reused,
                                  "error": self._expansion.error}
            self._expansion = None
        if self._embedding_error is not None:
            notes["embedding_error"] = self._embedding_error
            if self.embedder is not None:  # a failed call: the next step tries again
                self._embedding_error = None
        guarded = guard_lines(tree, observation) - kept
        kept |= guarded
        notes["guard_added_lines"] = sorted(i + 1 for i in guarded)
        notes["guarded_bids"] = guarded_bids(observation)
        view = rebuild_with_structure(tree, kept)
        self._previous_kept = kept
        shown_bids = observation.bids_on([*view.kept_lines, *view.context_lines])
        self.escalation.shown(lines, shown_bids)
        return FilterResult(
            name=self.name, text=view.text, kept_lines=view.kept_lines,
            context_lines=view.context_lines, shown_bids=shown_bids,
            ranges=line_ranges(view.kept_lines), tokens_full=observation.full_tokens,
            tokens_shown=count_tokens(view.text), calls=calls,
            tokens_full_view=observation.stateless_tokens,
            latency_ms=(time.perf_counter() - started) * 1000, notes=notes,
        )

    def _carried(self, observation: FilterInput, page: PageIndex, diff: PageDiff | None,
                 state: EscalationState, notes: dict[str, object]) -> set[int] | None:
        """The previous selection carried over to a page that changed little, or None
        when the selection must be made afresh (:mod:`.incremental`). Only filters that
        call a model (to choose lines or to expand the query) carry over: the candidate
        stages alone are cheap and stay fresh. Defender mode reads every new text, so it
        never carries over."""
        config = self.config
        asks_a_model = self.model is not None or self.expander is not None
        if (not config.incremental or config.defend or not asks_a_model or diff is None
                or state.reasons or self._previous_kept is None):
            return None
        return self._carry.select(
            page, observation, self._previous_kept, diff, notes,
            max_tokens=min(config.carry_over_tokens,
                           int(config.carry_over_share * observation.full_tokens)),
            max_steps=config.carry_over_steps, context=config.pad_lines,
            top_lexical=config.keep_top_lexical, lexical_context=config.lexical_context,
            items_budget=min(config.view_budget_tokens,
                             int(config.view_max_share * observation.full_tokens))
            if config.items else None,
            item_max_lines=config.item_max_lines,
            followed=[i for group in history_groups(
                page.tree, page.ranker, observation, context=config.lexical_context,
                passages=(page.units, page.passage_ranker))[:4]
                for i in group] if config.runs("followed") else [],
        )

    def _whole(self, observation: FilterInput, started: float,
               notes: dict[str, object]) -> FilterResult:
        every = range(1, len(observation.lines) + 1)
        bids = observation.bids_on(every)
        self._previous_kept = None
        self.escalation.shown(observation.lines, bids)
        return FilterResult(
            name=self.name, text=observation.text, kept_lines=list(every), shown_bids=bids,
            tokens_full=observation.full_tokens, tokens_shown=observation.full_tokens,
            latency_ms=(time.perf_counter() - started) * 1000, notes=notes,
        )

    def _with_items(self, observation: FilterInput, tree: LineTree,
                    candidates: CandidateSet, kept: set[int],
                    notes: dict[str, object]) -> set[int]:
        """The kept lines with their enclosing items, within the view budget. When the
        model chose, its lines are the seeds (then the best lexical hits); without a
        model, every candidate is a seed in the order the stages proposed it, and only
        the guard's lines and the best lexical hits are kept before the items."""
        budget = min(self.config.view_budget_tokens,
                     int(self.config.view_max_share * observation.full_tokens))
        if self.model is not None and "model_lines" in notes:
            base = kept
            seeds = sorted(kept - set(candidates.top_lexical)) + candidates.top_lexical
        else:
            base = guard_lines(tree, observation) | set(candidates.top_lexical)
            seeds = [*candidates.top_lexical, *candidates.order]
            if self.config.reserve_share > 0:
                reserved = reserved_lines(tree, candidates.groups,
                                          int(budget * self.config.reserve_share))
                notes["reserved_lines"] = len(reserved - base)
                base |= reserved
        expansion = expand_items(tree, base, seeds, budget,
                                 max_lines=self.config.item_max_lines)
        notes["items"] = {"view_budget_tokens": budget, "added": expansion.items_added,
                          "skipped": expansion.items_skipped,
                          "view_tokens": expansion.view_tokens}
        return expansion.lines

    # -- candidates

    async def _candidates(
        self, observation: FilterInput, tree: LineTree, previous: list[str] | None,
        budget: int, diff: PageDiff | None = None,
    ) -> CandidateSet:
        lines = observation.lines
        run = StageRun(observation, tree, self._page_of(lines), previous, diff,
                       context=self.config.lexical_context, top_k=self.config.embedding_top_k,
                       expander=self.expander, embedder=self.embedder, units=self._units)
        embedder_failed = False
        for stage in FOCUS_STAGES:
            if stage.name != ALWAYS and not self.config.runs(stage.name):
                continue
            if stage.needs == "embedder":
                if embedder_failed:
                    continue
                try:
                    proposed = await stage.propose(run)
                except (LLMError, ModelError) as exc:
                    embedder_failed = True
                    self._embedder_failed(exc)
                    continue
            else:
                proposed = await stage.propose(run)
            if proposed is not None:
                run.groups[stage.name] = proposed
        if run.expansion is not None:
            self._expansion = run.expansion
        groups = run.groups
        sizes = numbered_sizes(lines, (i for gs in groups.values() for g in gs for i in g.lines))
        room = self._observation_room(observation, budget)
        taken = fill_budget(groups, sizes, int(room * (1 - self.config.outline_share)),
                            top_lexical=self.config.keep_top_lexical)
        taken.ran = [stage for stage in self.config.stages if stage in groups]
        return taken

    def _embedder_failed(self, exc: LLMError | ModelError) -> None:
        """An embedding stage failed: recorded, and the filter goes on without the
        embedding stages this step (a failed call) or this episode (no embedder)."""
        if isinstance(exc, LLMError):
            log.warning("embedding stage failed; going on without it", error=str(exc))
            self._embedding_error = str(exc)
            return
        # The offline embedder cannot load (no `embedding` extra, a damaged file):
        # it will not load on a later step either.
        log.warning("embedder unavailable; the filter goes on without its stage",
                    error=str(exc))
        self.embedder, self._units = None, None
        self._embedding_error = f"unavailable for this episode: {exc}"

    def _page_of(self, lines: list[str]) -> PageIndex:
        """The index of this step's page: the last one if the page is the same."""
        self._page = self._page.following(lines) if self._page is not None else PageIndex(lines)
        return self._page

    def _observation_room(self, observation: FilterInput, budget: int) -> int:
        """Tokens left for the numbered lines once the prompt itself is counted, with a
        margin for the omission markers between runs."""
        overhead = count_message_tokens(self._messages(observation, ""))
        return max(0, int((budget - overhead) * 0.92))

    # -- the model's choice

    async def _choose(
        self, observation: FilterInput, tree: LineTree, candidates: CandidateSet,
        notes: dict[str, object],
    ) -> tuple[set[int], list[LLMCall]]:
        if self.model is None or not candidates.lines:
            notes["candidates_fallback"] = "no retriever model" if self.model is None else (
                "no candidate line")
            return set(candidates.lines), []
        prompt = self._prompt(observation, tree, candidates)
        notes["retriever_input_tokens"] = prompt.tokens
        notes["outline_lines"] = prompt.outline_lines
        chosen, calls, error = await self._ask(observation, prompt)
        if chosen is None:
            notes["candidates_fallback"] = error
            return set(candidates.lines), calls
        pad = self.config.pad_lines
        padded = {j for i in chosen for j in range(i - pad, i + pad + 1) if j in prompt.shown}
        notes["model_lines"] = sorted(i + 1 for i in chosen)
        return padded, calls

    def _prompt(self, observation: FilterInput, tree: LineTree,
                candidates: CandidateSet) -> _Prompt:
        """Candidates in full, then as many outline lines of the rest as fit, shortened;
        each run of lines not shown becomes one marker."""
        lines = observation.lines
        room = self._observation_room(observation, self.config.budget_tokens)
        used = candidates.tokens
        outline: list[int] = []
        rest = [e.index for e in by_priority(self._page_of(lines).outline)
                if e.index not in candidates.lines]
        for index in rest:
            cost = count_tokens(f"{index + 1}|{tree.short_head(index)}\n") + MARKER_TOKENS
            if used + cost > room:
                break
            outline.append(index)
            used += cost
        # the estimate may miss (markers, tokens merging across lines): outline lines go
        # first, then nothing else is over budget but the candidates themselves
        return within_budget(
            lambda kept: self._render(observation, tree, set(candidates.lines), kept),
            outline, self.config.budget_tokens)

    def _render(self, observation: FilterInput, tree: LineTree, candidates: set[int],
                outline: list[int]) -> _Prompt:
        outline_set = set(outline)
        shown = candidates | outline_set

        def show(index: int, line: str) -> str:
            return f"{index + 1}|{tree.short_head(index) if index in outline_set else line}"

        numbered = render_with_markers(observation.lines, (i + 1 for i in shown), show)
        messages = self._messages(observation, numbered)
        return _Prompt(numbered=numbered, messages=messages, shown=shown,
                       tokens=count_message_tokens(messages),
                       outline_lines=len(outline))

    def _messages(self, observation: FilterInput, numbered: str,
                  constrained: bool | None = None) -> list[dict[str, Any]]:
        """The chooser's request; ``constrained``: whether the schema carries the answer
        format (default: whether the next ask would send it)."""
        if constrained is None:
            constrained = (self.config.json_schema != "off" if self.model is None
                           else will_constrain(self.model, "json_schema", self.config.json_schema))
        history = ("\n".join(a.text for a in observation.history) if observation.history
                   else "(no action yet)")
        answer_format = ranges_answer_format(constrained, self.config.defend)
        user = render_prompt(
            self.user_prompt, answer_format=answer_format.strip(),
            goal=observation.goal.strip(), history=history, observation=numbered,
        )
        system = render_prompt("retriever_system.md")
        return [
            {"role": "system", "content": defend_system(system) if self.config.defend
             else system},
            {"role": "user", "content": user},
        ]

    async def _ask(
        self, observation: FilterInput, prompt: _Prompt
    ) -> tuple[set[int] | None, list[LLMCall], str]:
        """The 0-based lines the model chose among those shown, or None and why not."""
        assert self.model is not None
        total = len(observation.lines)
        shown_bids = {bid: i for i in prompt.shown if (bid := bid_of(observation.lines[i]))}

        def read(answer: str) -> set[int]:
            pairs = raw_ranges(answer)
            # a bound that is no line shown but a bid shown names that element
            aliased = {shown_bids[str(n)] for pair in pairs for n in pair
                       if n - 1 not in prompt.shown and str(n) in shown_bids}
            try:
                ranges = parse_ranges(answer, total)
            except RangeParseError:
                ranges = []
            chosen = {n - 1 for n in lines_of(merge_ranges(ranges))
                      if n - 1 in prompt.shown} | aliased
            if not chosen:
                raise RangeParseError("None of the chosen lines is among the lines shown.")
            if self.config.defend:
                self._named = injection_ranges(answer, total)
            return chosen

        result = await ask_structured(
            self.model,
            lambda constrained: self._messages(observation, prompt.numbered, constrained),
            read, constraint=ranges_constraint(self.config.defend),
            mode=self.config.json_schema, reask=ranges_reask(total),
            retries=self.config.max_retries, purpose="retriever",
            max_tokens=self.config.answer_tokens,
        )
        if result.value is not None:
            return result.value, result.calls, ""
        if result.failure is not None:
            return None, result.calls, f"retriever failed: {result.failure}"
        return None, result.calls, (f"no usable ranges after {self.config.max_retries + 1} "
                                    f"tries: {result.error}")

