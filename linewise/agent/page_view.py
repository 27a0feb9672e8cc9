"""What the action agent is shown of a page, made from one observation.

Three parts, in the order a step makes them: the filter's input (the page's lines, the
goal, the agent's history and the elements the recall guard keeps in view), the
filter's view fitted to the room the prompt leaves it (``prompt_fit``), and the
``PageView`` the prompt renders, with what the action grammar and the prompt's notes
read beside its text: the elements shown, which of them answer clicks, and the entry
links the last action pointed into. The step loop asks the agent for each part
(``ActionAgent.look_at``, ``filter_view``, ``show``); the hooks that see the filter's
view see it between the second and the third.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from linewise.agent.filters.base import FilterInput, FilterResult
from linewise.agent.history import PastStep
from linewise.agent.prompt import PageView
from linewise.agent.targets import pointed_entry_links
from linewise.axtree import element_lines, without_state
from linewise.records import Tab
from linewise.tokens import count_tokens

RECALL_HISTORY = 2
"""How many past actions' elements the recall guard keeps visible."""


class ElementFlags(Protocol):
    """What the DOM snapshot says of one element, as far as the view reads it."""

    @property
    def clickable(self) -> bool: ...


class Page(Protocol):
    """One observation of the page, as the agent reads it (the runtime's
    ``Observation`` is one)."""

    @property
    def url(self) -> str: ...
    @property
    def tabs(self) -> list[Tab]: ...
    @property
    def focused_bid(self) -> str: ...
    @property
    def lines(self) -> list[str]: ...
    @property
    def text(self) -> str: ...
    @property
    def elements(self) -> Mapping[str, ElementFlags]: ...


def page_key(url: str, lines: Iterable[str]) -> str:
    """A digest of the page's content (URL and every AXTree line): equal keys, the same
    page. Focus and the URL's fragment are left out (``axtree.without_state``): a click
    that only focuses an element or scrolls to an anchor changed nothing on the page."""
    digest = hashlib.sha1(url.partition("#")[0].encode())
    for line in lines:
        digest.update(b"\n" + without_state(line).encode())
    return digest.hexdigest()


def filter_input(goal: str, page: Page, history: Sequence[PastStep], *,
                 last_error: str | None, failed_bid: str | None = None) -> FilterInput:
    """What the filter may read of ``page``: its lines, the goal and the agent's history,
    with the elements the last ``RECALL_HISTORY`` actions named and the one the last
    action failed on (``failed_bid``) kept in view whatever the filter says."""
    must_keep = [bid for past in history[-RECALL_HISTORY:] if past.parsed
                 for bid in past.parsed.bids]
    if failed_bid:
        must_keep.append(failed_bid)
    return FilterInput(
        goal=goal,
        lines=page.lines,
        history=list(history),
        thoughts=[past.think or "" for past in history],
        focused_bid=page.focused_bid,
        last_action_error=last_error,
        must_keep_bids=list(dict.fromkeys(must_keep)),
        tokens_full=count_tokens(page.text),
    )


def blank_view(page: Page, last_error: str | None) -> PageView:
    """The view of ``page`` before the filter's text is in it: what the prompt shows
    around the page (address, tabs, focus, the last action's error) and the page's key."""
    return PageView(
        url=page.url,
        tabs=page.tabs,
        focused_bid=page.focused_bid,
        text="",
        last_action_error=last_error,
        page_key=page_key(page.url, page.lines),
    )


def show(view: PageView, page: Page, filtered: FilterResult,
         history: Sequence[PastStep]) -> PageView:
    """``view`` completed from what the filter showed: its text, each element shown with
    its line, which of them answer clicks (the DOM snapshot's flag), and the links that
    open the entry the last action pointed into (``targets.pointed_entry_links``)."""
    view.text = filtered.text
    lines = element_lines(page.lines, filtered.shown_bids)
    view.elements = {bid: lines.get(bid) for bid in filtered.shown_bids}
    view.clickable = frozenset(bid for bid in view.elements
                               if (found := page.elements.get(bid)) and found.clickable)
    if (last := history[-1].parsed if history else None) is not None:
        view.entry_links = pointed_entry_links(
            last, page.lines, frozenset(bid for bid in last.bids
                                        if (found := page.elements.get(bid)) and found.clickable),
            page.url)
    return view
