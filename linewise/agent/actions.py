"""The action vocabulary: BrowserGym's high-level actions as async functions.

Each function's signature (without the leading ``ctx``) and docstring *are* the text
the model reads in its prompt, so keep them short, exact and example-led. Functions are
registered with ``@action`` and only registered functions can ever be called: the
parser in ``action_parser`` looks names up in the registry.

What the runtime needs to know about an action is declared where it is registered
(``@action(pointer=True)``, ``@action(ends_episode=True)``…) and kept on its
``ActionSpec``: no list elsewhere names actions, so a new action is one function here
(and its test). What one task offers is an ``ActionSet`` (as BrowserGym's
``HighLevelActionSet``), built once per task (``ActionSet.for_task``) and passed down to
the prompt, the parser and the grammar.
"""

from __future__ import annotations

import datetime
import inspect
import pkgutil
import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Literal, Protocol, overload

from playwright.async_api import ElementHandle, Page

from linewise.agent.trace_zone import untraced
from linewise.axtree import AXLine
from linewise.errors import ActionError, ElementNotFound


class Tabs(Protocol):
    """The tabs of one episode, as the actions need them (the runtime's
    ``BrowserSession`` is one): which tab is active, and opening and switching tabs."""

    @property
    def page(self) -> Page: ...

    async def observed_element(self, bid: str) -> ElementHandle:
        """The element the last observation marked ``bid``, in the very document it
        observed; ``ActionError`` if that document is no longer the one in front,
        ``ElementNotFound`` if the element is gone."""
        ...

    async def open_tab(self) -> Page: ...

    async def focus_tab(self, index: int) -> Page: ...

    async def ensure_page(self) -> Page: ...

ActionFunction = Callable[..., Awaitable[None]]

TEXT_FIELD_ROLES = frozenset({
    "textbox", "searchbox", "spinbutton", "combobox", "slider", "ColorWell",
    "Date", "DateTime", "InputTime",
})
"""Roles of the elements Playwright's ``fill`` types into: text inputs and textareas,
number, date and time inputs (Chromium's own roles), ranges, colours and comboboxes."""

SELECT_ROLES = frozenset({"combobox", "listbox"})
"""Roles of a ``<select>``: ``combobox`` for a drop-down, ``listbox`` for a list."""

LABEL_ROLE = "LabelText"
"""A ``<label>``: Playwright acts on the control it labels. Where the label wraps its
control the kind is known (``AXLine.control``); a label apart from its control
(``<label for=…>``) may be named by ``fill`` and ``select_option`` alike."""

_NOT_TEXT = frozenset({"button", "checkbox", "radio", "switch", "listbox", "option", "link"})


def is_text_field(element: AXLine) -> bool:
    """Whether ``fill`` and ``clear`` can act on the element: a text-field role, or a
    contenteditable node (any other role that shows a ``value``)."""
    if element.role == LABEL_ROLE:
        return element.control is None or element.control in TEXT_FIELD_ROLES
    if element.role in TEXT_FIELD_ROLES:
        return True
    return element.role not in _NOT_TEXT and any(
        prop.startswith("value=") for prop in element.properties)


def is_select(element: AXLine) -> bool:
    """Whether ``select_option`` can act on the element (or on the control it labels)."""
    if element.role == LABEL_ROLE:
        return element.control is None or element.control in SELECT_ROLES
    return element.role in SELECT_ROLES


POINTER_TARGET_ROLES = frozenset({
    "link", "button", "checkbox", "radio", "switch", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "option", "treeitem", "combobox", "listbox", "textbox", "searchbox",
    "spinbutton", "slider", "DisclosureTriangle", LABEL_ROLE,
})
"""Roles that answer a click by themselves: controls, links, and labels (which act on
their control). Any other element answers one only where the page listens for it."""


def is_pointer_target(element: AXLine | None, clickable: bool) -> bool:
    """Whether a click on the element can do anything: a control or link, or an element
    the page listens to clicks on (``clickable``: the DOM snapshot's flag, or the
    ``clickable`` a listened-to generic is printed with). Unknown (None) counts as one."""
    if element is None or clickable:
        return True
    return element.role in POINTER_TARGET_ROLES or "clickable" in element.properties


def action_parameters(fn: ActionFunction) -> list[inspect.Parameter]:
    """The parameters the model passes: the signature without the leading ``ctx``."""
    return list(inspect.signature(fn).parameters.values())[1:]


_PLACEHOLDER = re.compile(r"""["'](<[^"'<>]+>)["']""")


def example_placeholders(fn: ActionFunction) -> frozenset[str]:
    """The ``"<...>"`` placeholders of an action's docstring examples.

    Examples whose text must come from the page are written as placeholders, and a
    model may copy them verbatim as it would copy an example sentence: the
    parser refuses an argument that is one, so the model is asked again.
    """
    return frozenset(_PLACEHOLDER.findall(fn.__doc__ or ""))


def render_signature(fn: ActionFunction) -> str:
    """``click(bid: str, button: Literal['left', 'middle', 'right'] = 'left', ...)``.

    Annotations are shown as written in the source (this module postpones their
    evaluation), so the model reads exactly what the code declares.
    """
    rendered = []
    for param in action_parameters(fn):
        text = f"{param.name}: {param.annotation}".replace('"', "'")
        if param.default is not inspect.Parameter.empty:
            text += f" = {param.default!r}"
        rendered.append(text)
    return f"{fn.__name__}({', '.join(rendered)})"


def describe_action(fn: ActionFunction) -> str:
    """The prompt text of one action: its signature without ``ctx``, then its docstring."""
    doc = inspect.cleandoc(fn.__doc__ or "")
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f"{render_signature(fn)}\n{body}"


@dataclass(frozen=True)
class ActionSpec:
    """One registered action: its function, and what the runtime reads off it.

    The properties are declared on the registration (``@action(pointer=True)``), beside
    the function, so that a new action is offered, parsed, constrained and treated by
    the runtime's rules without any other file naming it."""

    name: str
    function: ActionFunction
    pointer: bool = False
    """It only points at an element (``click``, ``hover``…): it changes none the way a
    fill or a key does. Pointer actions on one element count as one call when a repeat
    changed nothing (``agent.repeats``), and once one named an element that answers no
    click, they may name only clickable ones (``agent.targets``)."""
    acts_on: Callable[[AXLine], bool] | None = None
    """The test of the elements it works on, by their AXTree line (``is_text_field``
    for ``fill``): the grammar lets it name only those. None: any element."""
    ends_episode: bool = False
    """Its point is to end the episode (an answer, giving up): not offered where the
    page's own state ends it (MiniWoB++), and the prompt's rules say how to end only
    where one is."""
    leaves_page: bool = False
    """It leaves the page or its tab: not offered where the task is one page, which
    leaving only loses (MiniWoB++: ``goto`` of its own URL starts a new instance)."""
    types_text: bool = False
    """Its text arguments are what the agent typed or chose (``fill``'s value): where
    skill induction looks for the values of a goal (``apps/skills/induce.py``)."""
    opt_in: bool = False
    """Offered only where a run enables it (``run_skill``: ``--skills``); the standard
    vocabulary leaves it out."""
    idempotent: bool = False
    """It sets its element to what its arguments say (``fill``'s text, an option chosen,
    the focus) rather than changing it by a step: done again at once with the same
    arguments, it changes nothing. Skill induction keeps one of such repeats (a fill
    typed twice was the episode's detour, not a step of the task)."""
    replayed: bool = True
    """A program recorded from an episode keeps it. False where it changes nothing a
    later step relies on (``noop``): a replay skips it."""

    @property
    def parameters(self) -> list[inspect.Parameter]:
        """What the model passes: the signature without the leading ``ctx``."""
        return action_parameters(self.function)

    def describe(self) -> str:
        """Its prompt text: the signature, then the docstring."""
        return describe_action(self.function)


REGISTRY: dict[str, ActionSpec] = {}
"""Every registered action, by name, in the order registered (the prompt's order)."""


class _Functions(Mapping[str, ActionFunction]):
    """The registered actions' functions, by name: a view of ``REGISTRY``."""

    def __getitem__(self, name: str) -> ActionFunction:
        return REGISTRY[name].function

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


ACTIONS: Mapping[str, ActionFunction] = _Functions()
"""The function of every registered action, by name: what the executor calls."""


@overload
def action(fn: ActionFunction, /) -> ActionFunction: ...


@overload
def action(
    *, pointer: bool = False, acts_on: Callable[[AXLine], bool] | None = None,
    ends_episode: bool = False, leaves_page: bool = False, types_text: bool = False,
    idempotent: bool = False, opt_in: bool = False, replayed: bool = True,
) -> Callable[[ActionFunction], ActionFunction]: ...


def action(
    fn: ActionFunction | None = None, /, *, pointer: bool = False,
    acts_on: Callable[[AXLine], bool] | None = None, ends_episode: bool = False,
    leaves_page: bool = False, types_text: bool = False, idempotent: bool = False,
    opt_in: bool = False, replayed: bool = True,
) -> ActionFunction | Callable[[ActionFunction], ActionFunction]:
    """Register an async action function under its own name, with its properties
    (``ActionSpec``): ``@action`` or ``@action(pointer=True)``.

    An action that points at or acts on an element must take one (a parameter named
    ``bid`` or ending in it): the grammar and the rules find the element there."""

    def register(fn: ActionFunction) -> ActionFunction:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"action {fn.__name__} must be async")
        if (pointer or acts_on is not None) and not any(
                p.name.endswith("bid") for p in action_parameters(fn)):
            raise TypeError(f"action {fn.__name__} names no element (no bid parameter): "
                            "it can be neither a pointer action nor act on some elements")
        REGISTRY[fn.__name__] = ActionSpec(
            name=fn.__name__, function=fn, pointer=pointer, acts_on=acts_on,
            ends_episode=ends_episode, leaves_page=leaves_page, types_text=types_text,
            idempotent=idempotent, opt_in=opt_in, replayed=replayed)
        return fn

    return register if fn is None else register(fn)


def action_spec(name: str) -> ActionSpec:
    """The registered action ``name``; ``KeyError`` if there is none."""
    return REGISTRY[name]


@dataclass
class ActionContext:
    """What an action may touch: the episode's browser session and its outcome flags."""

    session: Tabs
    timeout_ms: int = 5000
    known_bids: frozenset[str] | None = None
    """Bids present in the last observation; ``None`` skips the check."""
    interactive_hint: str = ""
    """A few interactive elements of the page, quoted when the model names a wrong bid."""
    messages_to_user: list[str] = field(default_factory=list)
    infeasible_reason: str | None = None
    check_url: Callable[[str], str | None] | None = None
    """The navigation policy: why a URL the model asks for is refused, or None if it is
    allowed (and None for no policy)."""

    @property
    def page(self) -> Page:
        return self.session.page

    async def locate(self, bid: str) -> ElementHandle:
        """The element the model named: the one the last observation marked with this
        bid, in the document it observed (in a frame for a bid such as ``"aB12"``).

        Never whatever element of the tab now carries the bid's attribute: a page that
        learned the attribute can plant elements under it, on its own page or on another
        host it sends the tab to."""
        if not isinstance(bid, str) or not bid:
            raise ActionError(f"Expected a bid string such as '12', got {bid!r}.")
        if self.known_bids is not None and bid not in self.known_bids:
            reason = "not in the current page observation"
            if self.interactive_hint:
                reason += f"; elements you can use include {self.interactive_hint}"
            raise ElementNotFound(bid, reason)
        return await self.session.observed_element(bid)


@action(pointer=True)
async def click(
    ctx: ActionContext,
    bid: str,
    button: Literal["left", "middle", "right"] = "left",
    modifiers: list[Literal["Alt", "Control", "ControlOrMeta", "Meta", "Shift"]] | None = None,
) -> None:
    """
    Click an element: follow a link, press a button, tick a box, choose an option.

    Examples:
        click('a51')
        click('b22', button="right")
        click('48', button="middle", modifiers=["Shift"])
    """
    element = await ctx.locate(bid)
    if await _choose_option(element, modifiers or [], ctx.timeout_ms):
        return
    await element.click(button=button, modifiers=modifiers or [], timeout=ctx.timeout_ms)


_OPTION_JS = """(el) => {
    const select = el.tagName === 'OPTION' ? el.closest('select') : null;
    return select && {index: el.index, multiple: select.multiple,
                      selected: Array.from(select.selectedOptions, (o) => o.index)};
}"""
_ADDING_MODIFIERS = frozenset({"Control", "ControlOrMeta", "Meta", "Shift"})


async def _choose_option(element: ElementHandle, modifiers: Sequence[str], timeout_ms: int
                         ) -> bool:
    """Select the option when the element is an ``<option>`` of a ``<select>``; False
    for any other element. A closed list's options are in the accessibility tree but
    never visible, so a click on one waits out its timeout ("element is not visible"):
    the model reads "option 'Phil'" and clicks it, as a person would pick it. In a
    multiple list a click with Control, Meta or Shift toggles the option and keeps the
    others, as it does for a person."""
    with untraced(element):  # asking what the element is; the click or select is traced
        found = await element.evaluate(_OPTION_JS)
        if not found:
            return False
        index = int(found["index"])
        indices = [index]
        if found["multiple"] and _ADDING_MODIFIERS & set(modifiers):
            indices = sorted(set(found["selected"]) ^ {index})
        select = (await element.evaluate_handle("(el) => el.closest('select')")).as_element()
    if select is None:
        raise ActionError("the option's list is no longer on the page")
    await select.select_option(index=indices, timeout=timeout_ms)
    return True


@action(pointer=True)
async def dblclick(
    ctx: ActionContext,
    bid: str,
    button: Literal["left", "middle", "right"] = "left",
    modifiers: list[Literal["Alt", "Control", "ControlOrMeta", "Meta", "Shift"]] | None = None,
) -> None:
    """
    Double click an element.

    Examples:
        dblclick('12')
        dblclick('ca42', button="right")
    """
    element = await ctx.locate(bid)
    await element.dblclick(button=button, modifiers=modifiers or [], timeout=ctx.timeout_ms)


@action(pointer=True, idempotent=True)
async def hover(ctx: ActionContext, bid: str) -> None:
    """
    Move the mouse over an element, to show a menu or tooltip that appears on hover.
    Hovering neither follows a link nor finds anything on the page.

    Examples:
        hover('b8')
    """
    element = await ctx.locate(bid)
    await element.hover(timeout=ctx.timeout_ms)


@action(acts_on=is_text_field, types_text=True, idempotent=True)
async def fill(ctx: ActionContext, bid: str, value: str) -> None:
    """
    Fill out a form field. It focuses the element and triggers an input event with the entered text.
    It works for <input>, <textarea> and [contenteditable] elements.

    Examples:
        fill('237', 'example value')
        fill('45', "multi-line\\nexample")
    """
    element = await ctx.locate(bid)
    if not isinstance(value, str):
        raise ActionError(f"fill takes text, such as 'example value', got {value!r}.")
    if _DATE_LIKE.fullmatch(value.strip()):
        value = await _date_field_value(element, value.strip(), ctx.timeout_ms)
    await fill_in_its_document(element, value, ctx.timeout_ms)


@cache
def _fill_js() -> str:
    data = pkgutil.get_data(__package__ or "linewise.agent", "js/fill_element.js")
    if data is None:  # pragma: no cover - broken install
        raise ActionError("linewise is missing agent/js/fill_element.js")
    return data.decode("utf-8")


async def fill_in_its_document(element: ElementHandle, value: str, timeout_ms: int) -> None:
    """Playwright's ``fill``, but typed in one evaluation in the element's own document
    (``js/fill_element.js``), so no other frame or page can receive the text: it first
    waits, as Playwright's does, for the element to be visible and editable."""
    with untraced(element):  # the waits are the fill's, as Playwright's own fill's are
        await element.wait_for_element_state("visible", timeout=timeout_ms)
        await element.wait_for_element_state("editable", timeout=timeout_ms)
    why_not = await element.evaluate(_fill_js(), value)
    if why_not is not None:
        raise ActionError(f"Error: {why_not}")


_DATE_LIKE = re.compile(r"(\d{1,4})[/.-](\d{1,2})[/.-](\d{1,4})")
_FIELD_KIND_JS = "(el) => [el.tagName === 'INPUT' ? el.type : '', navigator.language || '']"


def iso_date(value: str, *, month_first: bool) -> str | None:
    """``value`` as a date field takes it (``2014-12-09``): from ``2014-12-09``,
    ``2014/12/9``, or a day and month in the locale's order (``12/09/2014`` is 9 December
    where the month comes first), the other order when the first number cannot be a
    month. None if it is no date."""
    match = _DATE_LIKE.fullmatch(value.strip())
    if match is None:
        return None
    a, b, c = (int(part) for part in match.groups())
    if len(match.group(1)) == 4:
        orders = [(a, b, c)]
    elif len(match.group(3)) == 4:
        orders = [(c, a, b), (c, b, a)] if month_first else [(c, b, a), (c, a, b)]
    else:
        return None
    for year, month, day in orders:
        try:
            return datetime.date(year, month, day).isoformat()
        except ValueError:
            continue
    return None


async def _date_field_value(element: ElementHandle, value: str, timeout_ms: int) -> str:
    """The value to fill: ISO for a date input (Playwright refuses ``12/09/2014`` there
    as "Malformed value", and a model types a date as the page shows it)."""
    with untraced(element):
        kind, language = await element.evaluate(_FIELD_KIND_JS)
    if kind != "date":
        return value
    iso = iso_date(value, month_first=str(language).lower() in _MONTH_FIRST_LOCALES)
    if iso is None:
        raise ActionError(f"{value!r} is not a date this field can take: a date field is "
                          "filled with year-month-day, e.g. '2014-12-09'.")
    return iso


_MONTH_FIRST_LOCALES = frozenset({"en-us", "en", "en-ph", "es-us"})
"""Locales whose dates show the month before the day (Chromium's default is en-US)."""


@action(acts_on=is_text_field, idempotent=True)
async def clear(ctx: ActionContext, bid: str) -> None:
    """
    Clear the input field.

    Examples:
        clear('996')
    """
    element = await ctx.locate(bid)
    await fill_in_its_document(element, "", ctx.timeout_ms)


@action(acts_on=is_select, types_text=True, idempotent=True)
async def select_option(ctx: ActionContext, bid: str, options: str | list[str]) -> None:
    """
    Select one or multiple options in a <select> element. You can specify
    option value or label to select. Multiple options can be selected.

    Examples:
        select_option('a48', "blue")
        select_option('c48', ["red", "green", "blue"])
    """
    element = await ctx.locate(bid)
    await element.select_option(options, timeout=ctx.timeout_ms)


@action(types_text=True)
async def press(ctx: ActionContext, bid: str, key_comb: str) -> None:
    """
    Focus the matching element and press a combination of keys. It accepts
    the logical key names: Backspace, Tab, Delete, Escape, ArrowDown, End, Enter,
    Home, PageDown, PageUp, ArrowRight, ArrowUp, F1 - F12, KeyA - KeyZ, etc.
    Modifiers: Shift, Control, Alt, Meta, ControlOrMeta.

    Examples:
        press('88', 'Backspace')
        press('a26', 'ControlOrMeta+a')
        press('61', 'Enter')
    """
    element = await ctx.locate(bid)
    await element.press(key_comb, timeout=ctx.timeout_ms)


@action(pointer=True, idempotent=True)
async def focus(ctx: ActionContext, bid: str) -> None:
    """
    Give an element the keyboard focus, before press(...). Focusing a link does not
    follow it.

    Examples:
        focus('b455')
    """
    element = await ctx.locate(bid)
    await element.focus()


@action
async def scroll(ctx: ActionContext, delta_x: float, delta_y: float) -> None:
    """
    Scroll horizontally and vertically. Amounts in pixels, positive for right or down
    scrolling, negative for left or up scrolling. Dispatches a wheel event.

    Examples:
        scroll(0, 200)
        scroll(-50.2, -100.5)
    """
    await ctx.page.mouse.wheel(float(delta_x), float(delta_y))


def refused_goto_message(url: str, reason: str) -> str:
    """The action error of a ``goto`` the navigation policy refused."""
    return f"goto({url!r}) was refused by the navigation policy: {reason}."


@action(leaves_page=True)
async def goto(ctx: ActionContext, url: str) -> None:
    """
    Navigate to a url.

    Examples:
        goto('http://www.example.com')
    """
    if not isinstance(url, str) or not url.strip():
        raise ActionError(f"goto needs a URL such as 'https://example.com', got {url!r}.")
    reason = ctx.check_url(url) if ctx.check_url is not None else None
    if reason is not None:
        raise ActionError(refused_goto_message(url, reason))
    await ctx.page.goto(url)


@action(leaves_page=True)
async def go_back(ctx: ActionContext) -> None:
    """
    Navigate to the previous page in history.

    Examples:
        go_back()
    """
    await ctx.page.go_back()


@action(leaves_page=True)
async def go_forward(ctx: ActionContext) -> None:
    """
    Navigate to the next page in history.

    Examples:
        go_forward()
    """
    await ctx.page.go_forward()


@action(leaves_page=True)
async def new_tab(ctx: ActionContext) -> None:
    """
    Open a new tab. It will become the active one.

    Examples:
        new_tab()
    """
    await ctx.session.open_tab()


@action(leaves_page=True)
async def tab_focus(ctx: ActionContext, index: int) -> None:
    """
    Bring tab to front (activate tab).

    Examples:
        tab_focus(2)
    """
    try:
        await ctx.session.focus_tab(index)
    except IndexError as exc:
        raise ActionError(str(exc)) from exc


@action(leaves_page=True)
async def tab_close(ctx: ActionContext) -> None:
    """
    Close the current tab.

    Examples:
        tab_close()
    """
    await ctx.page.close()
    await ctx.session.ensure_page()


@action(ends_episode=True)
async def send_msg_to_user(ctx: ActionContext, text: str) -> None:
    """
    Sends a message to the user. When the goal asks a question, this is your answer:
    state it with the names and values the page shows.

    Examples:
        send_msg_to_user("<the answer, as the page states it>")
    """
    ctx.messages_to_user.append(text)


@action(ends_episode=True)
async def report_infeasible(ctx: ActionContext, reason: str) -> None:
    """
    Notifies the user that their instructions are infeasible. Use it only once you know:
    what you look for may be elsewhere on the page or on another page.

    Examples:
        report_infeasible("<why the goal cannot be achieved>")
    """
    ctx.infeasible_reason = reason


@action(replayed=False)
async def noop(ctx: ActionContext, wait_ms: float = 1000) -> None:
    """
    Do nothing, and optionally wait for the given time (in milliseconds).

    Examples:
        noop()
        noop(500)
    """
    await ctx.page.wait_for_timeout(min(float(wait_ms), 30_000))


@action(opt_in=True)
async def run_skill(ctx: ActionContext, name: str, arguments: dict[str, str] | None = None
                    ) -> None:
    """
    Run a skill listed under "# Skills": steps recorded from solved tasks, replayed on
    this page with your arguments. Use it when a skill does what the goal asks.

    Examples:
        run_skill('login_user', {'username': 'ann', 'password': 'x7'})
    """
    raise ActionError("run_skill is run by the episode itself, where skills are loaded "
                      "(--skills)")


class ActionSet(Mapping[str, ActionSpec]):
    """The actions one task offers, in the prompt's order: a mapping of their names to
    their ``ActionSpec``, as BrowserGym's ``HighLevelActionSet`` is its task's.

    The runtime builds one per task (``for_task``) and passes it to everything that
    needs the vocabulary: the prompt describes it (the docstrings are the prompt text),
    the parser refuses a call outside it, the grammar allows only its calls, and the
    BrowserGym backend checks that it runs each action as declared here. It holds only
    registered actions: what the model may call is always a function of this module.
    Being a mapping of names, it goes wherever a collection of action names does.
    """

    def __init__(self, names: Iterable[str]) -> None:
        """The registered actions ``names``, in that order.

        Raises:
            ValueError: a name is not a registered action.
        """
        chosen = list(dict.fromkeys(names))
        unknown = [name for name in chosen if name not in REGISTRY]
        if unknown:
            raise ValueError(f"unknown action(s): {', '.join(unknown)}")
        self._specs = {name: REGISTRY[name] for name in chosen}

    @classmethod
    def registered(cls) -> ActionSet:
        """Every registered action, the opt-in ones included."""
        return cls(REGISTRY)

    @classmethod
    def standard(cls) -> ActionSet:
        """The vocabulary a prompt offers when it names no subset: every action but the
        opt-in ones."""
        return cls(name for name, spec in REGISTRY.items() if not spec.opt_in)

    @classmethod
    def of(cls, actions: Collection[str] | None) -> ActionSet:
        """``actions`` as a set: itself if it is one, the named actions if they are
        names, the standard vocabulary if None or empty."""
        if isinstance(actions, ActionSet):
            return actions
        return cls(actions) if actions else cls.standard()

    @classmethod
    def for_task(cls, *, agent_can_end: bool, single_page: bool,
                 skills: bool = False) -> ActionSet:
        """The actions a task offers.

        Where the page's own state ends the episode (MiniWoB++), an answer or a give-up
        ends nothing: a small model offered them answers a question it should click, or
        gives up on a page that shows what it needs (``ends_episode`` actions are left
        out). Where the task is one page (MiniWoB++), leaving it only loses the task
        (``leaves_page`` ones are). ``skills``: ``run_skill`` is offered too, last."""
        chosen = cls.standard().without(
            lambda spec: (spec.ends_episode and not agent_can_end)
            or (spec.leaves_page and single_page))
        return cls([*chosen, "run_skill"]) if skills else chosen

    def __getitem__(self, name: str) -> ActionSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"ActionSet({list(self._specs)!r})"

    @property
    def names(self) -> tuple[str, ...]:
        """The actions' names, in order."""
        return tuple(self._specs)

    def subset(self, names: Iterable[str]) -> ActionSet:
        """The actions ``names`` of this set, in this set's order.

        Raises:
            ValueError: a name is not in this set.
        """
        wanted = set(names)
        missing = sorted(wanted - set(self._specs))
        if missing:
            raise ValueError(f"not in this action set: {', '.join(missing)}")
        return ActionSet(name for name in self._specs if name in wanted)

    def without(self, leave_out: Callable[[ActionSpec], bool]) -> ActionSet:
        """This set less the actions ``leave_out`` is true of."""
        return ActionSet(name for name, spec in self._specs.items() if not leave_out(spec))

    @property
    def pointer_names(self) -> tuple[str, ...]:
        """The pointer actions (``ActionSpec.pointer``), in order."""
        return tuple(name for name, spec in self._specs.items() if spec.pointer)

    @property
    def ending_names(self) -> tuple[str, ...]:
        """The actions that end the episode (``ActionSpec.ends_episode``), in order."""
        return tuple(name for name, spec in self._specs.items() if spec.ends_episode)

    def describe(self) -> str:
        """The action-space section of the prompt: each action's signature and
        docstring."""
        return "\n\n".join(spec.describe() for spec in self._specs.values())


def describe_action_space(names: Collection[str] | None = None) -> str:
    """The action-space section of the prompt, for the standard vocabulary or the named
    actions (``ActionSet.describe``)."""
    return ActionSet.of(names).describe()
