"""One step's view of the browser, and the flattening every environment shares.

Both environments (linewise's own Chromium environment and BrowserGym's gym env) produce
a merged CDP accessibility tree whose nodes carry BrowserGym's ``browsergym_id`` plus the
DOM snapshot's per-element properties; ``flatten_axtree`` turns that into the indented
lines the model reads, so the same page gives the same observation whichever ran it.

Two departures from BrowserGym's defaults, both needed on current Chromium (see
docs/design.md, "Observations"): ``InlineTextBox`` nodes are dropped like ``LineBreak`` (they repeat
every text run and would double the size of a page), and ``generic`` nodes that are
clickable (spans and divs with click handlers, such as MiniWoB++'s links) are kept, marked
``clickable``, where BrowserGym would skip them for having no attributes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from browsergym.utils.obs import IGNORED_AXTREE_PROPERTIES, flatten_axtree_to_str

from linewise.axtree import INTERACTIVE_ROLES, number_lines, parse_line
from linewise.records import DialogRecord, SkippedFrame, Tab, TargetBox

IGNORED_ROLES = ("LineBreak", "InlineTextBox")
_SKIPPED_ROLE = "__linewise_skipped__"

InvisibleTextMode = Literal["drop", "mark", "keep"]
INVISIBLE_PROPERTY = "invisible"
"""The attribute a marked line carries: ``StaticText 'x', invisible='off-screen'``."""
_UNPRINTED_ROLES = frozenset({"generic", "none", "Ignored", *IGNORED_ROLES})


@dataclass(slots=True, frozen=True)
class ElementProperties:
    """What the DOM snapshot says about one marked element.

    A plain dataclass: a large page has tens of thousands of them per step.
    """

    visibility: float | None = None
    clickable: bool = False


@dataclass(slots=True)
class Observation:
    """One step's view of the browser, before any filtering.

    ``lines`` is the flattened AXTree, one element per line; ``elements`` maps every
    marked bid to its DOM-snapshot properties.
    """

    url: str
    title: str
    tabs: list[Tab]
    lines: list[str]
    focused_bid: str = ""
    elements: dict[str, ElementProperties] = field(default_factory=dict)
    screenshot_png: bytes | None = field(default=None, repr=False)
    screenshot_clip: TargetBox | None = None
    """The part of the viewport the screenshot shows, in CSS pixels, when it was cut to
    the page's content (``observe(crop=True)``); None: the whole viewport."""
    extraction_ms: float = 0.0
    skipped_frames: list[SkippedFrame] = field(default_factory=list)
    """Frames left out because their scripts did not answer in time."""
    dialogs: list[DialogRecord] = field(default_factory=list)
    """Dialogs the page opened since the previous observation (answered at once)."""
    invisible: dict[str, int] = field(default_factory=dict)
    """Nodes of text a person cannot see that were dropped or marked, by reason."""

    @property
    def text(self) -> str:
        """The AXTree as indented lines, as the action model sees it unfiltered."""
        return "\n".join(self.lines)

    @property
    def numbered(self) -> str:
        """Every line prefixed with its 1-based number: ``12|\\t[34] button 'OK'``."""
        return number_lines(self.lines)

    def interactive_hint(self, limit: int = 6) -> str:
        """A few interactive lines, e.g. ``[14] button 'Submit'; [12] textbox ''``."""
        found: list[str] = []
        for line in self.lines:
            parsed = parse_line(line)
            if parsed.bid is not None and parsed.role in INTERACTIVE_ROLES:
                found.append(parsed.head())
                if len(found) == limit:
                    break
        return "; ".join(found)


def flatten_axtree(axtree: dict[str, Any], elements: dict[str, ElementProperties]) -> list[str]:
    """Flatten a merged CDP AXTree into lines with browsergym-core's flattener.

    Generic nodes with no attributes are skipped as BrowserGym does, except clickable
    ones, which keep their bid and get a ``clickable`` attribute. The inner parts of a
    control (see ``_unmark_inner_parts``) are printed without a bid.
    """
    _unmark_inner_parts(axtree)
    clickable_generics: dict[str, dict[str, Any]] = {}
    for node in axtree["nodes"]:
        if node["role"].get("value") != "generic" or "name" not in node:
            continue
        bid = node.get("browsergym_id")
        if bid and bid in elements and elements[bid].clickable:
            clickable_generics[bid] = {
                "visibility": elements[bid].visibility or 0.0,
                "bbox": None,
                "clickable": True,
                "set_of_marks": False,
            }
        elif not _has_printed_attributes(node):
            node["role"] = {"type": "role", "value": _SKIPPED_ROLE}
    text = flatten_axtree_to_str(
        axtree,
        extra_properties=clickable_generics,
        with_clickable=True,
        skip_generic=False,
        ignored_roles=[*IGNORED_ROLES, _SKIPPED_ROLE],
    )
    return [_NBSP_ESCAPE.sub(r"\1 ", line) for line in text.split("\n") if line.strip()]


def _unmark_inner_parts(axtree: dict[str, Any]) -> None:
    """Take the bid off nodes that share it with their nearest marked ancestor.

    Such nodes are a control's own parts in its shadow tree (a date input's month, day
    and year spin buttons, its picker button; a media element's controls): they map to
    the control's DOM element, so an action on their bid acts on the whole control. A
    bid printed on each part reads as three fields to fill one at a time; printed once,
    on the control, it says there is one field."""
    def nearest_bid(node: dict[str, Any], marked_above: str | None) -> str | None:
        return node.get("browsergym_id", marked_above)

    for node, marked_above in _top_down(axtree, nearest_bid):
        if marked_above is not None and node.get("browsergym_id") == marked_above:
            del node["browsergym_id"]


def _top_down(
    axtree: dict[str, Any], passed_down: Callable[[dict[str, Any], str | None], str | None]
) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Every node once, from the roots down, with what its parent passed down to it
    (``passed_down(parent, what the parent got)``, read after the caller saw the parent;
    None at the roots)."""
    nodes = {node["nodeId"]: node for node in axtree["nodes"]}
    children = {child for node in axtree["nodes"] for child in node.get("childIds", [])}
    pending: list[tuple[dict[str, Any], str | None]] = [
        (node, None) for node in axtree["nodes"] if node["nodeId"] not in children
    ]
    seen: set[str] = set()
    while pending:
        node, got = pending.pop()
        if node["nodeId"] in seen:
            continue
        seen.add(node["nodeId"])
        yield node, got
        below = passed_down(node, got)
        pending.extend((nodes[c], below) for c in node.get("childIds", []) if c in nodes)


_NBSP_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\xa0")
"""The flattener writes names with Python's escapes: a no-break space, which preformatted
text (release notes, manual pages) has between every word, becomes the four characters
``\xa0``. Read as a space, it costs one token instead of three, and words stay words
for the lexical stages and the embedder. An escaped backslash before ``xa0`` is text."""


def _has_printed_attributes(node: dict[str, Any]) -> bool:
    """Whether browsergym's flattener would print any attribute for this node."""
    for prop in node.get("properties", []):
        value = prop.get("value", {})
        if "value" not in value or prop["name"] in IGNORED_AXTREE_PROPERTIES:
            continue
        if prop["name"] in ("required", "focused", "atomic") and not value["value"]:
            continue
        return True
    return False


def apply_invisible_text(
    axtree: dict[str, Any], invisible: Mapping[str, str], mode: InvisibleTextMode
) -> dict[str, int]:
    """Drop or mark, before flattening, the nodes whose text a person cannot see.

    ``invisible`` maps the bids of hidden elements to the reason (``js/invisible_text.js``);
    a node without a bid of its own (a text run) takes the verdict of its nearest marked
    ancestor, while a marked descendant is judged on its own bid (a visible child of a
    hidden box stays). ``drop`` removes the nodes' lines, ``mark`` adds
    ``invisible='<reason>'`` to them. Returns how many nodes that print a line were
    affected, by reason.
    """
    counts: dict[str, int] = {}
    if mode == "keep" or not invisible:
        return counts

    def verdict_of(node: dict[str, Any], inherited: str | None) -> str | None:
        bid = node.get("browsergym_id")
        return invisible.get(bid) if bid else inherited

    for node, inherited in _top_down(axtree, verdict_of):
        verdict = verdict_of(node, inherited)
        role = node["role"].get("value")
        if verdict is None or role in _UNPRINTED_ROLES:
            continue
        counts[verdict] = counts.get(verdict, 0) + 1
        if mode == "drop":
            node["role"] = {"type": "role", "value": _SKIPPED_ROLE}
        else:
            node.setdefault("properties", []).append(
                {"name": INVISIBLE_PROPERTY, "value": {"type": "string", "value": verdict}}
            )
    return counts
