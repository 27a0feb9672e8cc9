"""Assembling the action model's prompt from the templates in ``prompts/``."""

from __future__ import annotations

from collections.abc import Collection
from functools import cache

from pydantic import BaseModel, Field

from linewise.agent.actions import ActionSet
from linewise.agent.history import PastStep
from linewise.agent.targets import inert_bids, offered_targets, target_text
from linewise.axtree import AXLine
from linewise.prompts import load_prompt, render_prompt
from linewise.records import Tab

MAX_THOUGHT_CHARS = 400


class SkillOffer(BaseModel):
    """A skill the action model may call on this page (``run_skill``)."""

    name: str
    parameters: list[str] = Field(default_factory=list)
    doc: str = ""
    arguments: dict[str, str] | None = Field(
        default=None, description="The arguments the goal gives, when it fits the skill's "
        "goal template.")

    def call(self, arguments: dict[str, str] | None = None) -> str:
        """The call as the model writes it, with these arguments or placeholders."""
        values = arguments or {p: f"<{p}>" for p in self.parameters}
        if not self.parameters:
            return f"run_skill({self.name!r})"
        return f"run_skill({self.name!r}, {values!r})"


class PageView(BaseModel):
    """The page as the action model is shown it (the AXTree possibly filtered)."""

    url: str
    tabs: list[Tab] = Field(default_factory=list)
    focused_bid: str = ""
    text: str
    last_action_error: str | None = None
    page_key: str = Field(
        default="", description="Digest of the whole page (``page_view.page_key``), not shown."
    )
    elements: dict[str, AXLine | None] | None = Field(
        default=None, description="The elements the view shows (the filter's "
        "``shown_bids``), each with its AXTree line where known; not shown as such: the "
        "action grammar names only these, and each action only the kinds of element it "
        "can act on. None: not known, any id is allowed.",
    )
    clickable: frozenset[str] = Field(
        default=frozenset(), description="The elements the page listens to clicks on "
        "(the DOM snapshot's flag), not shown: a click on an element that is neither "
        "one of these nor a control or link does nothing (``agent.targets``).",
    )
    entry_links: dict[str, AXLine] = Field(
        default_factory=dict, description="Links of the page, in the view or not, that "
        "open the entry (a definition, a section) the last action pointed into, when what "
        "it pointed at answers no click (``targets.entry_links``): the note that says so "
        "names them, and the action grammar admits them.",
    )
    skills: list[SkillOffer] = Field(
        default_factory=list, description="The skills offered on this page (``--skills``).")
    guidance: str = Field(
        default="", description="A section the runtime adds after the notes: a replay "
        "that could not run a recorded step says what that step meant to do "
        "(``runtime/replay``).")


# Flags that change without saying what an action did: any click focuses its element.
_UNTOLD_PROPERTIES = ("focused", "clickable", "url=")


def render_history(history: list[PastStep], max_steps: int = 20, page_key: str = "",
                   url: str = "", *, thoughts: bool = True) -> str:
    """The past steps, oldest first, with their thoughts (``thoughts``); a pointer action
    after which the page and its URL were the same (``page_key``, ``url``: the page as it
    is now, after the last step) says so. A link to an anchor changes the URL alone, and
    counts as a change here."""
    if not history:
        return "(none yet: this is the first step)\n"
    shown = history[-max_steps:]
    first = len(history) - len(shown) + 1
    lines: list[str] = []
    if first > 1:
        lines.append(f"({first - 1} earlier step(s) not shown)")
    for number, step in enumerate(shown, first):
        thought = (step.think or "").strip().replace("\n", " ") if thoughts else ""
        if len(thought) > MAX_THOUGHT_CHARS:
            thought = thought[: MAX_THOUGHT_CHARS - 1] + "…"
        lines.append(f"Step {number}:")
        if thought:
            lines.append(f"  thought: {thought}")
        lines.append(f"  action: {step.action or '(none)'}")
        after = history[number] if number < len(history) else None
        if step.error:
            lines.append(f"  error: {step.error}")
        elif _changed_nothing(step, after, page_key, url):
            lines.append("  result: nothing on the page changed")
        elif moved := _moved_to(step, after.url if after is not None else url):
            lines.append(f"  result: {moved}")
        elif changed := _state_change(step):
            lines.append(f"  result: {changed}")
    return "\n".join(lines) + "\n"


def _state_change(step: PastStep) -> str:
    """How the element the step named changed state (``[22] checkbox 'a8h7' is now
    checked='true'``), "" when it did not or is not known. A view that shows the box
    checked does not say that the last click checked it: a model not told clicks it
    again, unchecking it."""
    before, after = step.target, step.target_after
    if before is None or after is None:
        return ""
    told = [p for p in after.properties
            if p not in before.properties and not p.startswith(_UNTOLD_PROPERTIES)]
    renewed = {p.partition("=")[0] for p in told}  # checked='false' → 'true' is told once
    lost = [p for p in before.properties
            if p not in after.properties and not p.startswith(_UNTOLD_PROPERTIES)
            and p.partition("=")[0] not in renewed]
    parts = ([f"is now {', '.join(told)}"] if told else []) + (
        [f"is no longer {', '.join(lost)}"] if lost else [])
    return f"{after.head(max_name=40)} {' and '.join(parts)}" if parts else ""


def _moved_to(step: PastStep, url: str) -> str:
    """Where the page went after ``step``, when its address changed ("" else). A page
    that scrolled to the entry a link opened looks much as before: a model not told
    that it arrived goes on clicking the entry's own links, and leaves it."""
    if not step.url or not url or url == step.url:
        return ""
    page, _, fragment = url.partition("#")
    if page == step.url.partition("#")[0] and fragment:
        return f"the page went to its part #{fragment}"
    return f"the browser went to {url}"


def _changed_nothing(step: PastStep, after: PastStep | None, page_key: str,
                     url: str) -> bool:
    """Whether ``step``, a pointer action, left the page and its URL as they were
    (``after``: the next step, taken on the page it left; else the page is ``page_key``
    at ``url``)."""
    if step.parsed is None or not step.parsed.spec.pointer or not step.page_key:
        return False
    if after is not None:
        page_key, url = after.page_key, after.url
    return step.page_key == page_key and step.url == url


def repeated_action_note(history: list[PastStep], threshold: int = 2) -> str:
    """A nudge when the same successful action was repeated ``threshold`` times or more.

    Small models tend to loop on an action that already worked (filling a field again and
    again instead of submitting); the note names the loop so the model can leave it.
    """
    if not history or not history[-1].action or history[-1].error:
        return ""
    last = history[-1].action
    count = 0
    for step in reversed(history):
        if step.action != last or step.error:
            break
        count += 1
    if count < threshold:
        return ""
    return "\n" + render_prompt("repeated_action.md", count=count, action=last)


def pointed_at_nothing_note(goal: str, view: PageView, history: list[PastStep]) -> str:
    """A note when the last step pointed at an element that answers no click and the page
    stayed as it was, naming what a pointer action may name next
    (``targets.offered_targets``)."""
    if not history or view.elements is None:
        return ""
    last = history[-1]
    if last.parsed is None or last.error or not last.page_key or last.page_key != view.page_key:
        return ""
    inert = inert_bids([last.parsed], view.elements, view.clickable)
    if not inert:
        return ""
    element = view.elements[inert[0]]
    assert element is not None
    lines = {**view.elements, **view.entry_links}
    offered = offered_targets(goal, view.elements, view.clickable, view.entry_links, view.url)
    listed = "".join(f"\n  {target_text(line)}" for bid in offered
                     if (line := lines[bid]) is not None)
    heading = ("Links the goal names or that open the entry it lies in" if view.entry_links
               else "Those in your view closest to the goal")
    targets = f" {heading}:{listed}" if listed else ""
    return "\n" + render_prompt(
        "pointed_at_nothing.md", action=str(last.parsed), element=element.head(max_name=60),
        targets=targets)


def render_skills(offers: list[SkillOffer]) -> str:
    """The skills section (``prompts/skills.md``): each offered skill's call and what it
    does, and the call with the goal's own values where the goal fits its template."""
    if not offers:
        return ""
    lines = []
    for offer in offers:
        lines.append(f"- {offer.call()}: {offer.doc}")
        if offer.arguments is not None:
            lines.append(f"  For this goal: {offer.call(offer.arguments)}")
    return "\n" + render_prompt("skills.md", skills="\n".join(lines))


def render_tabs(view: PageView) -> str:
    if not view.tabs:
        return f"  Tab 0 (active): {view.url}"
    return "\n".join(
        f"  Tab {tab.index}{' (active)' if tab.active else ''}: {tab.title!r} {tab.url}"
        for tab in view.tabs
    )


def build_action_messages(
    goal: str,
    view: PageView,
    history: list[PastStep],
    action_names: Collection[str] | None = None,
    examples: str = "",
    *,
    past_thoughts: bool = True,
) -> list[dict[str, str]]:
    """The system and user messages for one action decision (static part first).

    ``examples`` (the experience memory's worked examples, ``agent/experience``) open the
    user message: they stay the same for a whole episode, so a prefix cache keeps them
    with the system prompt, and the page that changes every step comes after them.
    ``past_thoughts``: the history shows each step's thought (else its action and result
    alone)."""
    last_error = (
        f"\n# Error from your last action\n{view.last_action_error}\n"
        if view.last_action_error
        else ""
    )
    user = render_prompt(
        "action_user.md",
        goal=goal.strip(),
        url=view.url,
        tabs=render_tabs(view),
        focused=f"[{view.focused_bid}]" if view.focused_bid else "(none)",
        observation=view.text,
        history=render_history(history, page_key=view.page_key, url=view.url,
                               thoughts=past_thoughts),
        last_error=last_error + repeated_action_note(history)
        + pointed_at_nothing_note(goal, view, history) + view.guidance
        + render_skills(view.skills),
    )
    return [
        {"role": "system", "content": system_prompt(action_names or ())},
        {"role": "user", "content": f"{examples}\n{user}" if examples else user},
    ]


def system_prompt(action_names: Collection[str] = ()) -> str:
    """The unchanging part of every action prompt: role, rules, action space, format.

    It comes first so that servers with prefix caching (llama.cpp, vLLM) evaluate it
    once for a whole run rather than at every step. ``action_names`` (the task's
    ``ActionSet``, or names; empty: the standard vocabulary) trims the action space;
    give the answer's parser (``parse_answer``) the same so that it refuses the actions
    the prompt left out. The rules say how to end the episode only where an action that
    ends it (``ActionSpec.ends_episode``) is offered.
    """
    # cached by the names offered, not by "the standard vocabulary": that is what the
    # registry holds now
    return _system_prompt(ActionSet.of(action_names).names)


@cache
def _system_prompt(names: tuple[str, ...]) -> str:
    actions = ActionSet(names)
    rules = load_prompt("action_rules_agent_ends.md" if actions.ending_names
                        else "action_rules_page_ends.md").template.strip()
    return render_prompt("action_system.md", action_space=actions.describe(),
                         ending_rules=rules)


def futile_repeat_message(action: str, done: list[str], error: str | None,
                          *, can_report: bool = False, leads_here: bool = False
                          ) -> dict[str, str]:
    """Tells the model that ``action``, answered again, changed nothing (or failed) when
    it was made on this page; ``done`` lists every call made since the page last changed.
    ``can_report``: the agent ends the episode itself, and is reminded that a goal
    already reached is reported (a model forbidden a repeat on the page it was asked
    to reach goes on to the next link it listed, and leaves the page).
    ``leads_here``: the action names a link to the very URL the page is at."""
    outcome = ("it leads to the address the page is already at" if leads_here
               else "nothing on the page changed")
    first_line = (error or "").strip().splitlines()[:1]
    if first_line:
        outcome = f"it failed ({first_line[0]}) and nothing on the page changed"
    report = (" If the goal is already reached, say so with send_msg_to_user."
              if can_report else "")
    return {
        "role": "user",
        "content": render_prompt("futile_repeat.md", action=action, done=", then ".join(done),
                                 outcome=outcome, report=report),
    }


def cycle_repeat_message(action: str) -> dict[str, str]:
    """Tells the model that ``action`` was made on this very page before, and the page
    has come back to it since: made again, it goes round the same loop."""
    return {"role": "user", "content": render_prompt("cycle_repeat.md", action=action)}


def retry_message(error: str) -> dict[str, str]:
    return {"role": "user", "content": render_prompt("action_retry.md", error=error)}
