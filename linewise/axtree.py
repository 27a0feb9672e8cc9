"""AXTree lines: the one place that knows the format of a flattened accessibility tree.

An observation is the page's accessibility tree flattened by BrowserGym into one line per
node, indented with one tab per level::

    RootWebArea 'Sign in', focused
    \t[12] textbox 'Email' value='a@b.c', required
    \t[13] button 'OK', clickable
    \t\tStaticText 'OK'

A line is ``{tabs}[{bid}] {role} {name!r}`` followed by `` value={value!r}`` when the node
has a value and ``, {property}`` for each property (a bare flag such as ``focused``, or
``key=repr(value)``). The bid is there only for marked elements, and an unnamed
``generic`` node shows no name. Models see the lines numbered (``12|\\t[34] button 'OK'``);
filtered views may hold marker lines (``… 3 lines omitted …``) that are not nodes.

:func:`parse_line` reads a line into an :class:`AXLine`; :func:`bid_of` and
:func:`line_depth` are its cheap parts for code that walks every line of a large page.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

__all__ = [
    "INTERACTIVE_ROLES",
    "AXLine",
    "bid_of",
    "bids_in",
    "element_lines",
    "line_depth",
    "number_lines",
    "parse_line",
    "without_state",
]

INTERACTIVE_ROLES = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox",
    "option", "menuitem", "tab", "switch", "slider", "spinbutton", "generic",
})
"""Roles of elements an action can use (``generic`` lines with a bid are clickable ones)."""

_CONTROL_ROLES = frozenset({
    "textbox", "searchbox", "spinbutton", "combobox", "listbox", "slider", "checkbox",
    "radio", "switch", "button", "ColorWell", "Date", "DateTime", "InputTime",
})
"""Roles of the form controls a label can wrap (Chromium's own for dates and colours)."""

_BID = re.compile(r"\t*\[([A-Za-z0-9]+)\] ")
_HEAD = re.compile(
    r"(?P<indent>\t*)(?:\[(?P<bid>[A-Za-z0-9]+)\] )?(?P<role>[^\s,]+)"
    r"(?: (?P<name>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
)


@dataclass(frozen=True, slots=True)
class AXLine:
    """One flattened AXTree line, read into its parts."""

    depth: int
    """Indentation level: the number of leading tabs."""
    bid: str | None
    """The element's bid, for marked elements."""
    role: str
    name: str | None
    """The accessible name (unquoted); None when the line shows none."""
    properties: tuple[str, ...] = ()
    """As written after the name: ``value='x'``, ``focused``, ``checked='true'`` …"""
    control: str | None = None
    """For a label (``LabelText``) read by :func:`element_lines`: the role of the
    control inside it (``<label>Agree <input type=checkbox></label>``), None when its
    lines hold none (a ``<label for=…>`` apart from its control)."""

    def head(self, max_name: int | None = None) -> str:
        """``[12] button 'OK'``: bid, role and name, without indentation or properties.

        Args:
            max_name: cut a longer name to this many characters, ending it with ``…``.
        """
        text = f"[{self.bid}] {self.role}" if self.bid is not None else self.role
        if self.name:
            name = self.name
            if max_name is not None and len(name) > max_name:
                name = name[: max_name - 1].rstrip() + "…"
            text += f" {name!r}"
        return text

    def has_flag(self, flag: str) -> bool:
        """Whether a bare property such as ``focused`` or ``clickable`` is set."""
        return flag in self.properties


def parse_line(line: str) -> AXLine:
    """Read one line (unnumbered). Never fails: text that is not a node line (a marker)
    comes back with its first word as the role and the rest as one property."""
    match = _HEAD.match(line)
    if match is None:  # an empty line, or one that starts with a space or a comma
        depth = line_depth(line)
        return AXLine(depth=depth, bid=None, role="", name=None,
                      properties=_properties(line[depth:]))
    quoted = match["name"]
    return AXLine(
        depth=len(match["indent"]),
        bid=match["bid"],
        role=match["role"],
        name=_unquote(quoted) if quoted is not None else None,
        properties=_properties(line[match.end():]),
    )


def without_state(line: str) -> str:
    """The line without what an action changes on a page whose content stays: the
    ``focused`` flag, and the document's ``url`` on its ``RootWebArea`` line (a click on
    an in-page link changes the fragment). The action prompt states the focused element
    and the URL apart from the tree; without them a view stays the same text from step to
    step, which a prefix cache reuses, and a diff sees only content that changed."""
    # the cheap substring tests first: every line of both pages passes here at each step
    root = "RootWebArea" in line and line.lstrip("\t").startswith("RootWebArea")
    if "focused" not in line and not root:
        return line
    match = _HEAD.match(line)
    if match is None:
        return line
    rest = line[match.end():]
    properties = [p for p in _properties(rest)
                  if p != "focused" and not (root and p.startswith("url="))]
    if not properties:
        return line[: match.end()]
    # a value follows the name after a space (``textbox '' value='x', focused``), other
    # properties after a comma: the line must read as it does without the flag
    lead = ", " if rest.lstrip(" ").startswith(",") else " "
    return line[: match.end()] + lead + ", ".join(properties)


def line_depth(line: str) -> int:
    """The indentation level of a line: its number of leading tabs."""
    return len(line) - len(line.lstrip("\t"))


def bid_of(line: str) -> str | None:
    """The bid a line starts with (after its indentation), if any."""
    match = _BID.match(line)
    return match.group(1) if match else None


def bids_in(lines: Iterable[str] | str) -> list[str]:
    """The bids of the node lines of a view (its text, or its lines), in order."""
    if isinstance(lines, str):
        lines = lines.split("\n")
    return [bid for line in lines if (bid := bid_of(line)) is not None]


def element_lines(lines: Iterable[str], bids: Iterable[str]) -> dict[str, AXLine]:
    """The line of each of these elements (its first line: a date input's parts repeat
    its bid), read; bids no line carries are left out. A label's line carries the role
    of the control it wraps (``AXLine.control``): an action on a label acts on that
    control."""
    wanted = set(bids)
    found: dict[str, AXLine] = {}
    labels: list[str] = []  # the bids of the labels whose subtree is being read
    for line in lines:
        depth = line_depth(line)
        while labels and depth <= found[labels[-1]].depth:
            labels.pop()
        bid = bid_of(line)
        if bid is None:
            continue
        element = parse_line(line) if labels or (bid in wanted and bid not in found) else None
        if element is not None and element.role in _CONTROL_ROLES:
            for label in labels:
                if found[label].control is None:
                    found[label] = replace(found[label], control=element.role)
        if element is not None and bid in wanted and bid not in found:
            found[bid] = element
            if element.role == "LabelText":
                labels.append(bid)
    return found


def number_lines(lines: Sequence[str], start: int = 1) -> str:
    """The lines prefixed with their numbers, as models see them: ``12|\\t[34] button 'OK'``."""
    return "\n".join(f"{i}|{line}" for i, line in enumerate(lines, start))


def _unquote(quoted: str) -> str:
    """The text of a Python string literal as ``repr`` writes it."""
    if "\\" not in quoted:
        return quoted[1:-1]
    try:
        value = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return quoted[1:-1]
    return value if isinstance(value, str) else quoted[1:-1]


def _properties(rest: str) -> tuple[str, ...]:
    """Split what follows the name (`` value='a, b', focused``) at top-level commas."""
    rest = rest.strip()
    if rest.startswith(","):
        rest = rest[1:]
    if not rest:
        return ()
    items: list[str] = []
    start, quote, nesting = 0, "", 0
    index = 0
    while index < len(rest):
        char = rest[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            nesting += 1
        elif char in ")]}":
            nesting = max(0, nesting - 1)
        elif char == "," and nesting == 0:
            items.append(rest[start:index].strip())
            start = index + 1
        index += 1
    items.append(rest[start:].strip())
    return tuple(item for item in items if item)
