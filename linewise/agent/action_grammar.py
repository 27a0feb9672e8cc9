"""A GBNF grammar for the action model's answer: a thought, then exactly one valid call.

llama.cpp (the embedded model, ``--gguf``) and other servers with grammar-guided decoding
sample only tokens the grammar allows, so an answer built under this grammar cannot be
malformed: one ``<action>`` block, one call of an action the prompt offered, literal
arguments of the declared types, and element ids drawn only from the bids the model was
shown. Small models otherwise name elements by role or label (``fill('textbox', …)``),
copy ids from the action space's examples, or write several statements.

The grammar is derived from the action functions' signatures and the properties they
were registered with (``agent.actions``), so it always matches what ``action_parser``
accepts: required arguments positionally, optional ones as ``name=value`` in declaration
order. The parser still checks every answer; the grammar only makes a valid answer the
one the model writes.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

from linewise.agent.action_parser import ParsedAction
from linewise.agent.actions import ActionFunction, ActionSet, ActionSpec, action_parameters
from linewise.axtree import AXLine

THOUGHT_CHARS = 600
"""Longest thought the grammar allows, in characters."""

_PRIMITIVES = """\
ws ::= " "?
sq-string ::= "'" ([^'\\\\\\n\\r] | escape)* "'"
dq-string ::= "\\"" ([^"\\\\\\n\\r] | escape)* "\\""
escape ::= "\\\\" (["'\\\\nrt0] | "x" hex{2} | "u" hex{4} | "U" hex{8})
hex ::= [0-9a-fA-F]
string ::= sq-string | dq-string
int ::= "-"? [0-9]{1,9}
float ::= "-"? [0-9]{1,9} ("." [0-9]{1,6})?
bool ::= "True" | "False"
"""


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def action_grammar(
    bids: Mapping[str, AXLine | None] | Iterable[str] | None,
    action_names: Collection[str] | None = None,
    *,
    thought_chars: int = THOUGHT_CHARS,
    forbid: Sequence[ParsedAction] = (),
    pointer_bids: Collection[str] | None = None,
    skills: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The grammar of ``<think>…</think>`` then ``<action>call</action>``.

    Args:
        bids: the element ids the model may name (those of its view), with each
            element's AXTree line where it is known: an action that works only on some
            kinds of element (``ActionSpec.acts_on``: ``fill`` on text fields,
            ``select_option`` on selects) may name only those, and elements whose line is
            not known. Actions left with no element to name are left out. ``None``: any
            id of BrowserGym's shape (frame letters, then digits).
        action_names: the actions the prompt offered (the task's ``ActionSet``, or their
            names; default: the standard vocabulary).
        thought_chars: the thought's longest length; 0 leaves the thought unbounded.
        forbid: calls the answer must not repeat (a futile repeat being escaped,
            ``agent.repeats``): each one's action may not name the same elements again,
            and an action that names none (``noop()``, ``go_back()``) is left out.
        pointer_bids: when given, the only elements a pointer action
            (``ActionSpec.pointer``: ``click``, ``hover``…) may name (``agent.targets``).
        skills: the skills ``run_skill`` may call here, each with its parameters' names
            (``runtime/replay/skill.py``); ``run_skill`` is left out without one.

    Raises:
        ValueError: nothing is left to call (every offered action forbidden or without
            an element to name).
    """
    elements: dict[str, AXLine | None] | None
    if bids is None:
        elements = None
    elif isinstance(bids, Mapping):
        elements = dict(bids)
    else:
        elements = dict.fromkeys(bids)
    forbidden_bids: dict[str, set[str]] = {}
    for call in forbid:
        forbidden_bids.setdefault(call.name, set()).update(call.bids)
    rules: dict[str, str] = {}
    calls: list[str] = []
    for name, spec in ActionSet.of(action_names).items():
        if name == "run_skill":
            if skills:
                rules["call-run-skill"] = _skill_rule(skills)
                calls.append("call-run-skill")
            continue
        needs_bid = any(p.name.endswith("bid") for p in spec.parameters)
        forbidden = forbidden_bids.get(name)
        if forbidden is not None and not needs_bid:
            continue
        named, targets_only = elements, False
        if pointer_bids is not None and spec.pointer and elements is not None:
            named = {bid: line for bid, line in elements.items() if bid in pointer_bids}
            targets_only = True
        bid_rule = (_bid_rule(spec, named, rules, forbidden, targets_only=targets_only)
                    if needs_bid else None)
        body = _call_rule(name, spec.function, bid_rule, rules)
        if body is not None:
            rule = f"call-{name.replace('_', '-')}"
            rules[rule] = body
            calls.append(rule)
    if not calls:
        raise ValueError("no action is left to call")
    thought = "[^<]*" if thought_chars <= 0 else f"[^<]{{0,{thought_chars}}}"
    head = [
        'root ::= "<think>" thought "</think>" "\\n"? "<action>" call "</action>"',
        f"thought ::= {thought}",
        f"call ::= {' | '.join(calls)}",
    ]
    return "\n".join([*head, *(f"{k} ::= {v}" for k, v in rules.items()), _PRIMITIVES])


def _skill_rule(skills: Mapping[str, Sequence[str]]) -> str:
    """``run_skill('name', {'param': '…', …})`` for each offered skill, its parameters in
    their order (the canonical form, ``ParsedAction.__str__``)."""
    choices = []
    for name, parameters in skills.items():
        if not parameters:
            choices.append(gbnf_literal(f"run_skill({name!r})"))
            continue
        pairs = ' "," ws '.join(f"{gbnf_literal(repr(p) + ':')} ws string" for p in parameters)
        opening = gbnf_literal(f"run_skill({name!r}, " + "{")
        choices.append(f'{opening} {pairs} ' + gbnf_literal("})"))
    return " | ".join(choices)


def _bid_rule(
    action: ActionSpec, elements: dict[str, AXLine | None] | None, rules: dict[str, str],
    forbidden: set[str] | None = None, *, targets_only: bool = False,
) -> str | None:
    """The rule of the element ids ``action`` may name (added to ``rules``), less the
    ``forbidden`` ones, or None when the view has none it could act on. ``elements``
    are pointer targets only (``targets_only``): the rule gets its own name."""
    if elements is None:
        rules["bid"] = "\"'\" [a-zA-Z]* [0-9]+ \"'\" | \"\\\"\" [a-zA-Z]* [0-9]+ \"\\\"\""
        return "bid"
    accepts = action.acts_on
    if accepts is None:
        rule, chosen = ("bid-pointer" if targets_only else "bid"), sorted(elements)
    else:
        rule = f"bid-{accepts.__name__.replace('_', '-')}"
        chosen = sorted(b for b, line in elements.items() if line is None or accepts(line))
    if forbidden:
        rule = f"bid-{action.name.replace('_', '-')}-again"
        chosen = [b for b in chosen if b not in forbidden]
    if not chosen:
        return None
    rules[rule] = " | ".join(
        f"\"'\" {gbnf_literal(b)} \"'\" | \"\\\"\" {gbnf_literal(b)} \"\\\"\"" for b in chosen
    )
    return rule


def _call_rule(
    name: str, fn: ActionFunction, bid_rule: str | None, rules: dict[str, str]
) -> str | None:
    """``name(required, …, optional…)``, or None when it needs a bid and the view has
    none it could name. Optional arguments go positionally while none is skipped, then
    as ``name=value`` in declaration order: the forms the parser binds, the canonical
    one (``ParsedAction.__str__``) included."""
    hints = typing.get_type_hints(fn)
    required: list[str] = []
    optional: list[tuple[str, str]] = []
    for param in action_parameters(fn):
        if param.name.endswith("bid"):
            if bid_rule is None:
                return None
            value = bid_rule
        else:
            value = _value_rule(param.name, hints[param.name], rules)
        if param.default is inspect.Parameter.empty:
            required.append(value)
        else:
            optional.append((param.name, value))
    parts = [gbnf_literal(f"{name}(")]
    parts.extend(value if index == 0 else f'"," ws {value}' for index, value in enumerate(required))
    if optional:
        parts.append(_optional_rule(optional, 0, first=not required))
    parts.append('")"')
    return " ".join(parts)


def _optional_rule(optional: list[tuple[str, str]], start: int, *, first: bool) -> str:
    """The optional arguments from ``start`` on: the next positionally (then the rest),
    or keywords only; ``first``: nothing precedes them in the call (no comma)."""
    if start == len(optional):
        return ""
    comma = "" if first else '"," ws '
    positional = f"{comma}{optional[start][1]} {_optional_rule(optional, start + 1, first=False)}"
    return f"({positional.strip()} | {_keywords_rule(optional, start, first=first)})?"


def _keywords_rule(optional: list[tuple[str, str]], start: int, *, first: bool) -> str:
    """At least one ``name=value`` from ``start`` on, in declaration order."""
    choices = []
    for index in range(start, len(optional)):
        name, value = optional[index]
        comma = "" if first else '"," ws '
        rest = " ".join(
            f'("," ws {gbnf_literal(later + "=")} {later_value})?'
            for later, later_value in optional[index + 1:]
        )
        choices.append(f"{comma}{gbnf_literal(name + '=')} {value} {rest}".strip())
    return "(" + " | ".join(choices) + ")"


def _value_rule(param: str, hint: Any, rules: dict[str, str]) -> str:
    """The grammar of one argument's value, by its type hint."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        options = typing.get_args(hint)
        rule = f"lit-{'-'.join(str(o) for o in options)}".lower()
        rule = "".join(c if c.isalnum() or c == "-" else "-" for c in rule)
        rules[rule] = " | ".join(
            f"\"'\" {gbnf_literal(str(o))} \"'\" | \"\\\"\" {gbnf_literal(str(o))} \"\\\"\""
            for o in options
        )
        return rule
    if origin in (typing.Union, types.UnionType):
        choices = [_value_rule(param, arg, rules) for arg in typing.get_args(hint)]
        return "(" + " | ".join(choices) + ")"
    if origin is list:
        (item,) = typing.get_args(hint)
        element = _value_rule(param, item, rules)
        return f'"[" ws ({element} ("," ws {element})*)? ws "]"'
    if hint is type(None):
        return '"None"'
    if hint is str:
        return "string"
    if hint is bool:
        return "bool"
    if hint is int:
        return "int"
    if hint is float:
        return "(float | int)"
    raise TypeError(f"no grammar for argument {param!r} of type {hint!r}")
