"""Inducing skills from solved episodes: what the episodes of one task have in common,
with the values their goals gave as parameters.

Rules, and why:

- Episodes are grouped by task template: the task without its seed (MiniWoB++'s page,
  BrowserGym's task, a web task's id), then by the shape of the goal (its number of
  literal spans: quoted strings and words).
- A literal of the goal becomes a parameter when it reappears, as whole words, in what
  an episode did (the text of a ``fill``, an option chosen, the name, text, label or
  value of an element acted on or of its named ancestors, or a word of those: ``#2`` in
  ``Tab #2``) and, where the group has several episodes, when it differs between them:
  a word every goal shares ("Submit") is part of the task, not an argument. Adjacent
  words typed or chosen together are one literal ("Norfolk Island"). An ordinal ("3rd")
  that is, in every episode, the place of an element acted on among equal ones is a
  parameter of its own kind: it chooses the element, whatever the page's count. A group of one
  episode cannot show what varies: there its quoted strings and numbers count, and a
  word only where it was typed or chosen (a goal's word is what the agent typed, not a
  button's fixed label).
- Typed text that comes from no goal (a word the agent read off the page) is the
  episode's own: a group of one episode that typed such text gives no skill, since
  another run of the task needs other text, and neither does a group where another
  episode typed other text there (two sums that came out the same are still sums);
  only when every episode typed the same text is it part of the task.
- A step that repeats the one before it with an idempotent action (a fill typed
  twice into the same field) is one step: the repeat was the episode's detour.
- Clicks that opened tabs or sections the goal did not name, before another step, were
  a search for that step's element: they become one reveal step, which opens controls
  of that role until the element is shown (``ProgramStep.reveal``).
- Each episode's program is rewritten with ``{{name}}`` for its own values; the skill is
  the rewritten program most episodes agree on (its provenance lists them), so a detour
  one episode took is not part of it. They agree on what each step did and to which
  element; where that element stood (its context, heading, neighbouring text) and the
  state it was left in may differ, and what differs is left out of the skill. Pruned
  trajectories (``linewise prune``) make the cleanest programs, and are used where
  given.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from linewise.locators import ordinal_number
from linewise.records import TargetLocator
from linewise.runtime.replay.program import Program, ProgramStep
from linewise.runtime.replay.skill import Skill, SkillParameter, placeholder

_SPAN = re.compile(r'"(?P<dq>[^"]+)"|(?<!\w)\'(?P<sq>[^\']+)\'(?!\w)|(?P<word>[^\s"]+)')
_TRIM = ".,;:!?()[]"
_STOPWORDS = frozenset({
    "a", "an", "the", "and", "or", "to", "into", "in", "on", "of", "with", "from", "for",
    "enter", "type", "select", "click", "choose", "press", "then", "is", "as", "by", "at",
})


@dataclass(frozen=True)
class _Span:
    """A literal of a goal: its text, where it stands, and whether it was quoted."""

    value: str
    start: int
    end: int
    quoted: bool

    @property
    def numeric(self) -> bool:
        return any(char.isdigit() for char in self.value)


def goal_spans(goal: str) -> list[_Span]:
    """The goal's literals in order: quoted strings (without their quotes) and words
    (without trailing punctuation)."""
    spans = []
    for match in _SPAN.finditer(goal):
        if match["word"] is not None:
            word = match["word"].strip(_TRIM)
            if not word:
                continue
            start = match.start() + match["word"].index(word)
            spans.append(_Span(word, start, start + len(word), quoted=False))
        else:
            group = "dq" if match["dq"] is not None else "sq"
            spans.append(_Span(match[group], match.start(group), match.end(group),
                               quoted=True))
    return spans


def program_spans(program: Program) -> list[_Span]:
    """The goal's literals as this episode used them: adjacent unquoted words that the
    episode typed or chose together, as one phrase ("Norfolk Island" chosen in a list),
    are one literal. So goals whose values have other numbers of words (a one-word and
    a two-word country) have the same shape, and the value is one parameter, not one
    per word. Words only found together in an element's name stay apart: in "Click on
    Tab #2" the "Tab" is the task's and the "#2" the goal's."""
    spans = goal_spans(program.goal)
    merged: list[_Span] = []
    index = 0
    while index < len(spans):
        end = index
        if not spans[index].quoted:
            while (end + 1 < len(spans) and not spans[end + 1].quoted
                   and _typed(program.goal[spans[index].start:spans[end + 1].end], program)):
                end += 1
        if end > index:
            first, last = spans[index], spans[end]
            merged.append(_Span(program.goal[first.start:last.end], first.start, last.end,
                                quoted=False))
        else:
            merged.append(spans[index])
        index = end + 1
    return merged


def task_template(program: Program) -> str:
    """The task without its seed: MiniWoB++'s page, BrowserGym's task or the task id."""
    spec = program.task or {}
    for key in ("miniwob", "browsergym"):
        if isinstance(spec.get(key), str):
            return str(spec[key])
    return re.sub(r"\.seed\d+$", "", program.task_id)


def skill_name(template: str) -> str:
    name = re.sub(r"[^a-z0-9]+", "_", template.lower()).strip("_") or "skill"
    return name if name[0].isalpha() else f"skill_{name}"[:64]


def induce_skills(programs: Iterable[Program]) -> list[Skill]:
    """One skill per task template (and goal shape) that some solved program has."""
    groups: dict[tuple[str, int], list[Program]] = {}
    for program in programs:
        key = (task_template(program), len(program_spans(program)))
        groups.setdefault(key, []).append(program)
    skills: list[Skill] = []
    taken: set[str] = set()
    for (template, _shape), group in sorted(groups.items()):
        skill = _induce(template, group)
        if skill is None:
            continue
        name, n = skill.name, 1
        while name in taken:
            n += 1
            name = f"{skill.name}_{n}"
        taken.add(name)
        skills.append(skill.model_copy(update={"name": name}))
    return skills


def _induce(template: str, group: Sequence[Program]) -> Skill | None:
    spans = [program_spans(program) for program in group]
    ordinals = _ordinal_positions(group, spans)
    positions = sorted(set(_parameter_positions(group, spans)) | set(ordinals))
    names = _parameter_names(spans[0], positions, ordinals)
    rewritten: list[tuple[str, list[ProgramStep], Program]] = []
    for program, own in zip(group, spans, strict=True):
        values = {names[i]: own[i].value for i in positions}
        places = {names[i]: (ordinal_number(own[i].value) or 0) - 1 for i in ordinals}
        goal = _goal_template(program.goal, own, positions, names)
        steps = _with_reveals(_without_repeats([_rewrite_step(step, values, places)
                                                for step in program.steps]))
        rewritten.append((goal, steps, program))
    signatures = Counter(_signature(goal, steps) for goal, steps, _ in rewritten)
    # most episodes agreeing; then the program that uses the goal's values (one that
    # happened to find the value already chosen works on its own page only); then the
    # shortest
    best, _count = max(signatures.items(), key=lambda item: (
        item[1], repr(item[0][1]).count("{{"), -len(item[0][1])))
    agreeing = [(goal, steps, program) for goal, steps, program in rewritten
                if _signature(goal, steps) == best]
    # the base is an episode that had to search, if one did: a search is skipped where
    # what it uncovers is already shown, while a program without one fails where it is not
    agreeing.sort(key=lambda item: -sum(step.reveal for step in item[1]))
    goal, base, first = agreeing[0]
    steps = _generalize(base, [steps for _goal, steps, _program in agreeing[1:]])
    literal = _literal_typed(steps)
    if literal and (len(agreeing) == 1 or any(
            _literal_typed(other) != literal for _goal, other, _program in rewritten)):
        # text no goal gave, typed once, or typed otherwise by another episode of the
        # group (a sum that came out 8 twice and 5 once): it was read off the page, and
        # another run needs other text
        return None
    # A parameter the steps never use stays one only where the goals differ there: the
    # goal template must still fit every goal of the group. Elsewhere it is its literal
    # text again, since a placeholder no argument fills would fit no goal.
    used = {name for step in steps for name in _placeholders_in(step)}
    own = spans[group.index(first)]
    kept = [i for i in positions
            if names[i] in used or len({program_spans[i].value for program_spans in spans}) > 1]
    goal = _goal_template(first.goal, own, kept, names)
    parameters = [SkillParameter(name=names[i], example=own[i].value,
                                 kind="ordinal" if i in ordinals else "text") for i in kept]
    return Skill(
        name=skill_name(template),
        doc=goal.replace("{{", "{").replace("}}", "}"),
        goal_template=goal,
        parameters=parameters,
        steps=steps,
        precondition=list(steps[0].targets),
        provenance=[program.source for _goal, _steps, program in agreeing],
    )


def _parameter_positions(group: Sequence[Program], spans: list[list[_Span]]) -> list[int]:
    """The goal positions that are parameters (see the module's rules)."""
    positions = []
    for position in range(len(spans[0])):
        values = [program_spans[position].value for program_spans in spans]
        if not any(_reappears(value, program)
                   for value, program in zip(values, group, strict=True)):
            continue
        # an episode may not have used it (the list already showed the value asked
        # for): the others show what varies
        varies = len(group) > 1 and len(set(values)) > 1
        # what one episode alone shows to be an argument: a quoted string or a number
        # it acted with, or words it typed; episodes whose goals happened to agree on it
        # show no less
        given = all(_reappears(value, program) and (
            spans[0][position].quoted or spans[0][position].numeric or _typed(value, program))
            for value, program in zip(values, group, strict=True))
        if varies or given:
            positions.append(position)
    return positions


def _ordinal_positions(group: Sequence[Program], spans: list[list[_Span]]) -> list[int]:
    """The goal positions holding an ordinal ("3rd", "third") that, in every episode,
    is the place of an element it acted on among several equal ones (the 3rd of the
    page's unnamed textboxes): which one is the goal's to say."""
    positions = []
    for position in range(len(spans[0])):
        numbers = [ordinal_number(program_spans[position].value) for program_spans in spans]
        if all(number is not None and any(
                target.matches > 1 and target.ordinal == number - 1
                for step in program.steps for target in step.targets)
               for number, program in zip(numbers, group, strict=True)):
            positions.append(position)
    return positions


def _literal_typed(steps: list[ProgramStep]) -> list[str]:
    """The texts a program typed that hold no parameter, in order."""
    return [text for step in steps if step.parsed().spec.types_text
            for text in _typed_texts(step) if text and "{{" not in text]


def _typed_texts(step: ProgramStep) -> list[str]:
    """The text arguments of a step (what it typed or chose where its action
    ``types_text``: ``fill``, ``select_option``, ``press``…)."""
    action = step.parsed()
    texts = [v for k, v in action.arguments.items()
             if isinstance(v, str) and not k.endswith("bid")]
    return texts + [v for v in action.arguments.values() if isinstance(v, list)
                    for v in v if isinstance(v, str)]


def _typed(value: str, program: Program) -> bool:
    return any(_word_of(value, text) for step in program.steps for text in _typed_texts(step)
               if step.parsed().spec.types_text)


def _word_of(value: str, name: str | None) -> bool:
    """Whether ``value`` stands in ``name`` as whole words: "and" is not in "Island"."""
    return bool(name) and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", name or "") is not None


def _reappears(value: str, program: Program) -> bool:
    for step in program.steps:
        if any(_word_of(value, text) for text in _typed_texts(step)):
            return True
        if any(_word_of(value, text) for t in step.targets
               for text in (t.name, t.text, t.label, t.value, *t.context)):
            return True
    return False


def _parameter_names(spans: list[_Span], positions: list[int],
                     ordinals: Sequence[int] = ()) -> dict[int, str]:
    names: dict[int, str] = {}
    for position in positions:
        before = [s.value.lower() for s in spans[:position] if not s.quoted]
        word = re.sub(r"[^a-z0-9_]", "", before[-1]) if before else ""
        base = word if word and word[0].isalpha() and word not in _STOPWORDS else "value"
        if position in ordinals:
            base = "nth"
        name, n = base, 1
        while name in names.values():
            n += 1
            name = f"{base}_{n}"
        names[position] = name
    return names


def _goal_template(goal: str, spans: list[_Span], positions: list[int],
                   names: dict[int, str]) -> str:
    for position in sorted(positions, reverse=True):
        span = spans[position]
        goal = goal[:span.start] + placeholder(names[position]) + goal[span.end:]
    return goal


def _rewrite_step(step: ProgramStep, values: dict[str, str],
                  places: dict[str, int] | None = None) -> ProgramStep:
    """The step with each parameter's value (longest first) in place of its text, and
    an ordinal parameter as the place of the element among equal ones that it gave
    (``places``: parameter -> place from 0)."""
    ordered = sorted(values.items(), key=lambda item: -len(item[1]))

    def swap(text: str) -> str:
        for name, value in ordered:
            text = text.replace(value, placeholder(name))
        return text

    action = step.parsed()
    arguments = {
        key: (swap(value) if isinstance(value, str) and not key.endswith("bid")
              else [swap(v) if isinstance(v, str) else v for v in value]
              if isinstance(value, list) else value)
        for key, value in action.arguments.items()
    }
    rewritten = type(action)(name=action.name, arguments=arguments)
    states = [{k: swap(v) for k, v in s.items()} for s in step.state_after]
    if action.spec.types_text and "{{" in str(rewritten):
        # what a field shows after text a parameter typed is that text in the field's
        # own form (a date typed 01/18/2019 shows 2019-01-18): kept only where it holds
        # the parameter, for another value shows another text
        states = [{k: v for k, v in s.items() if k != "value" or "{{" in v} for s in states]
    return step.model_copy(update={
        "action": str(rewritten),
        "thought": swap(step.thought) if step.thought else step.thought,
        "targets": [_rewrite_locator(t, values, places or {}) for t in step.targets],
        "state_after": states,
    })


def _rewrite_locator(locator: TargetLocator, values: dict[str, str],
                     places: dict[str, int]) -> TargetLocator:
    """A locator whose name, label or value holds a parameter's value as a word, or
    whose place among equal elements an ordinal parameter gave."""
    ordered = sorted(values.items(), key=lambda item: -len(item[1]))

    def swap(text: str | None) -> str | None:
        for name, value in ordered:
            if text:
                text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)",
                              placeholder(name).replace("\\", "\\\\"), text)
        return text

    ordinal = next((name for name, place in places.items()
                    if locator.matches > 1 and locator.ordinal == place), None)
    return locator.model_copy(update={"ordinal_parameter": ordinal,
                                      "name": swap(locator.name) or "",
                                      "context": tuple(swap(c) or "" for c in locator.context),
                                      "text": swap(locator.text),
                                      "label": swap(locator.label),
                                      "value": swap(locator.value)})


def _signature(goal: str, steps: list[ProgramStep]) -> tuple[str, tuple[object, ...]]:
    """What two rewritten programs must share to be one skill: the goal template, and
    each step's action without its element ids and its elements' identities (role and
    name, or the text inside it, or for an element with neither its label). Where an
    element is, and what is around it, may differ: see :func:`_generalize`."""
    shape = []
    for step in steps:
        if step.reveal:
            continue  # a search happens where the page needs it (see _with_reveals)
        action = step.parsed()
        arguments = tuple(sorted((k, repr(v)) for k, v in action.arguments.items()
                                 if not k.endswith("bid")))
        targets = tuple((t.role, t.name, t.text, None if t.name or t.text else t.label)
                        for t in step.targets)
        shape.append((action.name, arguments, targets))
    return goal, tuple(shape)


def _generalize(base: list[ProgramStep], programs: list[list[ProgramStep]]
                ) -> list[ProgramStep]:
    """The base program with what the programs agreeing with it do not share left out:
    a target's context, heading, value or (for an element known by its name or text)
    label that differs between them was that episode's page, not the task's, and a
    locator that kept it would find the element on none of the other pages. So is a
    recorded effect that differs. Steps are compared leaving reveal steps out."""
    if not programs:
        return base
    cores = [[step for step in program if not step.reveal] for program in programs]
    steps = []
    core_index = -1
    for step in base:
        if step.reveal:
            steps.append(step)
            continue
        core_index += 1
        others = [core[core_index] for core in cores]
        targets = []
        for position, target in enumerate(step.targets):
            seen = [other.targets[position] for other in others]
            update: dict[str, object] = {}
            for field, empty in (("context", ()), ("heading", None), ("value", None),
                                 ("label", None)):
                if field == "label" and not (target.name or target.text):
                    continue  # an unnamed element's label is what it is
                if any(getattr(other, field) != getattr(target, field) for other in seen):
                    update[field] = empty
            targets.append(target.model_copy(update=update))
        state_after = [
            {key: value for key, value in state.items()
             if all(position < len(other.state_after)
                    and other.state_after[position].get(key) == value for other in others)}
            for position, state in enumerate(step.state_after)
        ]
        steps.append(step.model_copy(update={"targets": targets, "state_after": state_after}))
    return steps


def _without_repeats(steps: list[ProgramStep]) -> list[ProgramStep]:
    """The program with a step that repeats the one before it (the same action, with
    the same arguments, on the same element) left out where the action is idempotent:
    a second identical fill changed nothing, and a skill that kept it would spend a
    step on every page, and differ from the episodes that typed once."""
    kept: list[ProgramStep] = []
    for step in steps:
        if kept and step.action == kept[-1].action and step.parsed().spec.idempotent:
            continue
        kept.append(step)
    return kept


_DISCLOSED = ("selected", "expanded")
"""The state a click on a tab or a section header changes: it shows what it holds."""


def _with_reveals(steps: list[ProgramStep]) -> list[ProgramStep]:
    """The program with each run of clicks that opened controls of one role (tabs,
    section headers) before another step made one reveal step (``ProgramStep.reveal``).

    A run qualifies when its clicks name no parameter (the goal did not say which tab:
    a goal that does, "Click on Tab #2", keeps its click), at least one of them opened
    its control (``selected`` or ``expanded`` changed) and a step follows: the episode
    was looking for that step's element, and which tab held it is that page's, not the
    task's. The detours of the run (a tab clicked twice, a wrong one first) go with it."""
    out: list[ProgramStep] = []
    index = 0
    while index < len(steps):
        end = index
        while end < len(steps) and _opens_a_control(steps[end], steps[index]):
            end += 1
        run = steps[index:end]
        if (end < len(steps) and run
                and any(key in state for step in run for state in step.state_after
                        for key in _DISCLOSED)):
            target = run[0].targets[0]
            out.append(run[0].model_copy(update={
                "reveal": True, "url_after": None, "state_after": [],
                "thought": "Open the next one until what the next step needs is shown.",
                "targets": [TargetLocator(bid=target.bid, role=target.role,
                                          frames=target.frames)],
            }))
            index = end
        else:
            out.append(steps[index])
            index += 1
    return out


def _opens_a_control(step: ProgramStep, first: ProgramStep) -> bool:
    """Whether ``step`` may belong to a run of clicks starting at ``first``: a click on
    one element of the first one's role, naming no parameter."""
    if step.parsed().name != "click" or len(step.targets) != 1 or _placeholders_in(step):
        return False
    return bool(first.targets) and step.targets[0].role == first.targets[0].role


def _placeholders_in(step: ProgramStep) -> set[str]:
    text = step.action + " ".join(
        f"{t.name} {t.text or ''} {t.label or ''} {t.value or ''} {' '.join(t.context)}"
        for t in step.targets)
    return (set(re.findall(r"\{\{([a-z][a-z0-9_]*)\}\}", text))
            | {t.ordinal_parameter for t in step.targets if t.ordinal_parameter})
