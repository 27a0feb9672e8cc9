"""Locators: find an element an action named again, in another tree of the same page.

A bid is only valid in the tree it was read from: on a fresh load of the page a banner
inserted above shifts every bid, a list may come in another order, a dialog may add
elements of its own. To replay a solved episode, each action's element is recorded as a
:class:`~linewise.records.TargetLocator` (what it is, where it is, which of the equal
elements it was) by :func:`locate`, and found again by :func:`resolve`.

The resolver never guesses. It identifies an element by its role and its exact name
(whitespace collapsed), and an unnamed one by the text shown before it (its label) or its
value; the named ancestors, the heading above and the place among equal elements only
choose among elements that are all the element by that identity. A renamed button is not
found (``none``), an element that became another role is reported (``changed_role``) and
a choice the recording cannot settle is refused (``several``): replay then hands the step
to a model, where a wrong guess would act on the wrong element without a word.

The tree is read in one pass (:class:`TreeIndex`); a locator is looked up in it by
dictionary. :func:`locate` and :func:`resolve` read the tree for one call; code that
locates or resolves several elements of one tree builds the index once.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from linewise.axtree import parse_line
from linewise.records import TargetLocator

__all__ = [
    "STATE_PROPERTIES",
    "Resolution",
    "TreeIndex",
    "Unresolved",
    "describe",
    "element_state",
    "locate",
    "resolve",
]

STATE_PROPERTIES = ("value", "checked", "selected", "expanded", "pressed")
"""The properties an action changes on an element (``focused`` is not one: it moves with
every click and says nothing of the action's effect)."""

Unresolved = Literal["none", "several", "changed_role"]
"""Why a locator found no element: ``none`` (no element has its role and name, or its
label), ``changed_role`` (elements have its name, but another role), ``several`` (more
than one element is it and the recording cannot tell which)."""

_MAX_TEXT = 80
"""Labels, values, headings and the names in a context are cut to this many characters:
enough to tell elements apart, and a locator is written with every step."""

_TEXT_ROLES = frozenset({"StaticText", "LabelText", "heading", "paragraph", "caption", "term"})
"""Roles of the lines that show text a person reads as the label of what follows."""

_TEXT_CONTAINERS = frozenset({"LabelText", "heading", "paragraph", "caption", "term"})
"""Of those, the roles that show their text in ``StaticText`` children when their own
name is empty (``[18] LabelText ''`` over ``StaticText 'Username'``)."""

_UNCONTEXTUAL = frozenset({"RootWebArea", "Iframe"})
"""Ancestors never part of a context: a document's name is its title, which changes with
its content, and a frame is recorded in ``frames``."""

_MAX_CONTEXT = 3

_VALUED_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider",
                           "listbox", "Date", "DateTime", "InputTime"})
"""Roles whose inner text is what a person typed or chose (their value), never what the
element is: they are not known by their text."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where :func:`resolve` found a locator's element, or why it found none.

    Exactly one of ``bid`` and ``reason`` is None."""

    bid: str | None
    """The element's bid in the tree resolved in; None when it was not found."""
    reason: Unresolved | None
    """Why it was not found; None when it was."""
    detail: str
    """A sentence for a person or a prompt: what was looked for and what was found."""


@dataclass(frozen=True, slots=True)
class _Element:
    """An element of a tree with what a locator holds of it."""

    bid: str
    role: str
    name: str
    value: str | None
    label: str | None
    text: str | None
    context: tuple[str, ...]
    heading: str | None
    frames: tuple[str, ...]

    @property
    def key(self) -> tuple[object, ...]:
        """What equal elements share (the heading is not part of it: see :func:`locate`)."""
        return (self.frames, self.role, self.name, self.value, self.label, self.text,
                self.context)


@dataclass(slots=True)
class _Open:
    """An ancestor whose subtree is being read, of those the walk keeps: the named ones,
    the frames and the unnamed text containers."""

    depth: int
    role: str
    named: bool
    """Whether it is in the context of the lines under it."""
    frame: bool
    outer_heading: str | None
    """For a frame: the heading of the document around it, back in force after it."""
    text: list[str] | None
    """For an unnamed text container: the text of its ``StaticText`` children so far."""
    content: list[str] | None = None
    """For an unnamed element that may be known by its text: the ``StaticText`` of its
    subtree so far."""
    element: int | None = None
    """The index of that element in the walk's list."""


class TreeIndex:
    """The elements of one tree (unnumbered lines), read in one pass, for locating and
    resolving any number of elements in it.

    An element is a line with a bid; a bid repeated on later lines (a date input's
    parts) names the element of its first line."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._elements: dict[str, _Element] = {}
        self._ordinals: dict[str, int] = {}
        self._equal: dict[tuple[object, ...], list[_Element]] = {}
        self._by_name: dict[tuple[tuple[str, ...], str, str], list[_Element]] = {}
        self._roles_by_name: dict[tuple[tuple[str, ...], str], dict[str, None]] = {}
        for element in _walk(lines):
            self._elements[element.bid] = element
            group = self._equal.setdefault(element.key, [])
            self._ordinals[element.bid] = len(group)
            group.append(element)
            self._by_name.setdefault((element.frames, element.role, element.name), []) \
                .append(element)
            if element.name:
                self._roles_by_name.setdefault((element.frames, element.name), {})[
                    element.role] = None

    def bids(self) -> list[str]:
        """The bids of the tree's elements, in document order."""
        return list(self._elements)

    def has_role(self, role: str) -> bool:
        """Whether some element of the tree has this role."""
        return any(element.role == role for element in self._elements.values())

    def locate(self, bid: str) -> TargetLocator | None:
        """The locator of element ``bid``; None when no line carries that bid."""
        element = self._elements.get(bid)
        if element is None:
            return None
        return TargetLocator(
            bid=bid, role=element.role, name=element.name, value=element.value,
            label=element.label, text=element.text, context=element.context,
            heading=element.heading,
            frames=element.frames, ordinal=self._ordinals[bid],
            matches=len(self._equal[element.key]),
        )

    def resolve(self, locator: TargetLocator) -> Resolution:
        """Find the locator's element in this tree (see :func:`resolve`)."""
        name = _collapse(locator.name)
        what = _what(locator)
        candidates = self._by_name.get((locator.frames, locator.role, name), [])
        if not name:
            # the text inside an unnamed element identifies it as a name does; else its
            # label; its value is what actions change, so it identifies one only when
            # nothing else does
            if locator.text is not None:
                candidates = [c for c in candidates if c.text == locator.text]
            elif locator.label is not None:
                candidates = [c for c in candidates if c.label == locator.label]
            elif locator.value is not None:
                # a value only tells equal elements apart: it is what actions and seeds
                # change (a list's default option), so it never rules out the only one
                valued = [c for c in candidates if c.value == locator.value]
                candidates = valued or candidates
        if not candidates:
            roles = [r for r in self._roles_by_name.get((locator.frames, name), {})
                     if r != locator.role] if name else []
            if roles:
                found = " and ".join(f"{r} {name!r}" for r in roles)
                return Resolution(None, "changed_role",
                                  f"no element {what} in the page, only {found}")
            return Resolution(None, "none", f"no element {what} in the page")
        if len(candidates) == 1:
            return _found(candidates[0], f"{what} is the only element of its kind")
        key = (locator.frames, locator.role, name, locator.value, locator.label,
               locator.text, locator.context)
        equal = [c for c in candidates if c.key == key]
        if len(equal) == 1:
            return _found(equal[0], f"{what} is the only one in its context")
        among = equal or candidates  # no candidate in the recorded context: it changed
        headed = [c for c in among if c.heading == locator.heading]
        if len(headed) == 1:
            return _found(headed[0], f"{what} is the only one under its heading")
        if not equal:
            changed = ("context" if all(c.context != locator.context for c in candidates)
                       else f"value {locator.value!r}")
            return Resolution(None, "several", f"{len(candidates)} elements {what} match, "
                              f"and none has the recorded {changed}")
        if len(equal) != locator.matches and locator.ordinal_parameter is None:
            return Resolution(None, "several", f"{len(equal)} elements {what} match "
                              f"equally, the recording had {locator.matches}")
        if not 0 <= locator.ordinal < len(equal):  # a locator not made by locate()
            return Resolution(None, "several", f"{len(equal)} elements {what} match "
                              f"equally, the locator's place {locator.ordinal} is none")
        chosen = equal[locator.ordinal]
        if headed and chosen.heading != locator.heading:
            return Resolution(None, "several", f"{len(equal)} elements {what} match "
                              f"equally as recorded, but the {_nth(locator.ordinal + 1)} "
                              f"is not under heading {locator.heading!r}")
        return _found(chosen, f"{what} is the {_nth(locator.ordinal + 1)} of "
                      f"{len(equal)} equal elements, as recorded")


def locate(lines: Sequence[str], bid: str) -> TargetLocator | None:
    """The locator of element ``bid`` in the tree ``lines`` (unnumbered); None when no
    line carries that bid.

    - ``role``, ``name``: the line's, the name whitespace collapsed ('' when none).
    - ``value`` and ``label``, for an element whose name is empty: its ``value='…'``
      property, and the text of the closest line before it among its siblings that shows
      text (``StaticText``, ``LabelText``, a heading …, a label's text being in its
      ``StaticText`` children): MiniWoB++'s login form has ``LabelText`` 'Username' then
      ``[19] textbox ''``. A named element is known by its name: both stay None.
    - ``text``, for an element whose name is empty, that has no value and is not a
      field (a textbox's text is what was typed in it): the ``StaticText`` of its
      subtree, joined by spaces. A clickable ``generic`` with no name shows its words
      inside it (``[30] generic, clickable`` over ``StaticText 'lorem.'``); those words
      are what it is, as a name would be, where the text before it is only its
      neighbour's.
    - ``context``: its named ancestors, outermost first, as ``role 'name'``, the 3
      innermost; never the ``RootWebArea`` (its name is the page title, which changes
      with the content) nor an ``Iframe`` (see ``frames``).
    - ``heading``: the name of the closest heading before it in the same frame.
    - ``frames``: the ``Iframe 'name'`` lines it lies under, outermost first.
    - ``ordinal``, ``matches``: its place (from 0, in document order) among the
      elements equal to it, and their number. Equal means the same role, name, value,
      label, context and frames; not the heading, which only narrows a choice: a tree
      often has a heading that the page around the element does not decide.

    Labels, values, headings and the names in a context are cut at 80 characters.
    """
    return TreeIndex(lines).locate(bid)


def resolve(locator: TargetLocator, lines: Sequence[str]) -> Resolution:
    """Find the locator's element in the tree ``lines``, never by a guess.

    1. Candidates: the elements in the same frames with the same role and name (names
       compared whitespace collapsed, exactly otherwise: a renamed button is ``none``,
       for a model to heal, never its look-alike). An unnamed element's text must match
       when the locator has one, else its label when it has one, else its value.
    2. None: ``changed_role`` when elements in those frames have the (non-empty) name
       with another role, else ``none``.
    3. One candidate is the element. Of several, those with the recorded context are the
       element if they are one; else those of them (or, when none has that context, of
       the candidates) under the recorded heading, if they are one.
    4. Still several: when as many elements are equal to the locator as when it was
       recorded, its place among them is meaningful and names it (unless that element
       is not under the recorded heading while others are); otherwise ``several``.
    """
    return TreeIndex(lines).resolve(locator)


def describe(locator: TargetLocator) -> str:
    """The locator in one line for a person or a prompt: ``button 'Submit' in form
    'Login', under heading 'Sign in'``; ``textbox labelled 'Username'``; ``link 'Edit'
    in row 'Ann' (2nd of 3)``; ``button 'OK' in frame Iframe 'ad'``. Contexts and frames
    read innermost first, as one says where a thing is."""
    text = _what(locator, with_frames=False)
    for ancestor in reversed(locator.context):
        text += f" in {ancestor}"
    for frame in reversed(locator.frames):
        text += f" in frame {frame}"
    if locator.heading is not None:
        text += f", under heading {locator.heading!r}"
    if locator.matches > 1:
        text += f" ({_nth(locator.ordinal + 1)} of {locator.matches})"
    return text


def element_state(lines: Sequence[str], bid: str) -> dict[str, str]:
    """The state properties (:data:`STATE_PROPERTIES`) written on element ``bid``'s line,
    their values unquoted, as written otherwise (``checked='false'`` gives ``'false'``,
    ``selected=True`` gives ``'True'``); empty when the line has none or no line carries
    the bid. Replay compares it with the recording's to check an action's effect."""
    for line in lines:
        if f"[{bid}]" not in line:  # the cheap test first: most lines are not it
            continue
        parsed = parse_line(line)
        if parsed.bid != bid:
            continue
        state: dict[str, str] = {}
        for prop in parsed.properties:
            key, equals, raw = prop.partition("=")
            if equals and key in STATE_PROPERTIES:
                state[key] = _unquote(raw)
        return state
    return {}


def _walk(lines: Sequence[str]) -> list[_Element]:
    """The elements of the tree in document order, with what a locator holds of them.

    One pass with a stack of the ancestors that matter. ``shown[d]`` is the last text
    shown at depth ``d`` among the children of the current parent at ``d - 1``: a line at
    depth ``d`` drops what deeper levels held (it starts a new subtree), and the levels
    above stay those of its ancestors."""
    elements: list[_Element] = []
    seen: set[str] = set()
    stack: list[_Open] = []
    context: list[str] = []  # the names of the named ancestors on the stack
    frames: list[str] = []
    shown: list[str | None] = []
    heading: str | None = None

    def close(closed: _Open) -> None:
        nonlocal heading
        if closed.named:
            context.pop()
        if closed.frame:
            frames.pop()
            heading = closed.outer_heading
        if closed.element is not None and closed.content:
            element = elements[closed.element]
            elements[closed.element] = replace(element, text=_clip(" ".join(closed.content)))

    for line in lines:
        if not line.strip():
            continue
        parsed = parse_line(line)
        depth = parsed.depth
        while stack and stack[-1].depth >= depth:
            close(stack.pop())
        del shown[depth + 1:]
        shown.extend([None] * (depth + 1 - len(shown)))
        role = parsed.role
        name = _collapse(parsed.name or "")
        collects: int | None = None
        if parsed.bid is not None and parsed.bid not in seen:
            seen.add(parsed.bid)
            value = None
            if not name:
                value = next((_clip(_unquote(p[6:])) for p in parsed.properties
                              if p.startswith("value=")), None)
                if value is None and role not in _VALUED_ROLES:
                    collects = len(elements)
            elements.append(_Element(
                bid=parsed.bid, role=role, name=name, value=value,
                label=shown[depth] if not name else None, text=None,
                context=tuple(context[-_MAX_CONTEXT:]), heading=heading,
                frames=tuple(frames),
            ))
        if name and role in _TEXT_ROLES:
            shown[depth] = _clip(name)
        parent = stack[-1] if stack and stack[-1].depth == depth - 1 else None
        if name and role == "StaticText":
            if parent is not None and parent.text is not None:
                parent.text.append(name)
                shown[depth - 1] = _clip(" ".join(parent.text))
            for open_ in stack:
                if open_.content is not None and sum(map(len, open_.content)) < _MAX_TEXT:
                    open_.content.append(name)
        named = bool(name) and role not in _UNCONTEXTUAL
        frame = role == "Iframe"
        container = not name and role in _TEXT_CONTAINERS
        if named or frame or container or collects is not None:
            # other lines matter to none under them
            stack.append(_Open(depth, role, named, frame, heading,
                               [] if container else None,
                               [] if collects is not None else None, collects))
        if named:
            context.append(f"{role} {_clip(name)!r}")
        if frame:
            frames.append(f"{role} {name!r}")
            heading = None
        elif role == "heading" and name:
            heading = _clip(name)
    while stack:
        close(stack.pop())
    return elements


def _found(element: _Element, why: str) -> Resolution:
    return Resolution(element.bid, None, f"found [{element.bid}]: {why}")


def _what(locator: TargetLocator, *, with_frames: bool = True) -> str:
    """``button 'Submit'``, ``textbox labelled 'Username'``, ``combobox with value
    'red'``, ``button 'OK' in frame Iframe 'ad'``: the identity the resolver looks for."""
    name = _collapse(locator.name)
    text = f"{locator.role} {name!r}" if name else locator.role
    if not name and locator.text is not None:
        text += f" showing {locator.text!r}"
    elif not name and locator.label is not None:
        text += f" labelled {locator.label!r}"
    elif not name and locator.value is not None:
        text += f" with value {locator.value!r}"
    if with_frames:
        for frame in reversed(locator.frames):
            text += f" in frame {frame}"
    return text


ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh",
                 "eighth", "ninth", "tenth")
ORDINAL_PATTERN = r"\d+(?:st|nd|rd|th)|" + "|".join(ORDINAL_WORDS)
"""An ordinal as goals write it: ``3rd`` or ``third`` (any case)."""


def ordinal_number(text: str) -> int | None:
    """The number an ordinal says (``3rd`` and ``third`` are 3); None for other text."""
    text = text.strip().lower()
    if text in ORDINAL_WORDS:
        return ORDINAL_WORDS.index(text) + 1
    match = re.fullmatch(r"(\d+)(st|nd|rd|th)", text)
    if match is None or int(match[1]) < 1:
        return None
    return int(match[1])


def _nth(number: int) -> str:
    """1st, 2nd, 3rd, 4th … 11th, 12th, 13th … 21st."""
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    if number % 100 in (11, 12, 13):
        suffix = "th"
    return f"{number}{suffix}"


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1].rstrip() + "…"


def _unquote(raw: str) -> str:
    """A property's value as text: a quoted one read as the literal ``repr`` wrote."""
    if raw[:1] in ("'", '"'):
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw[1:-1]
        if isinstance(value, str):
            return value
    return raw
