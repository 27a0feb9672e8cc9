"""GBNF grammars without recursion, as Python regular expressions: what text they admit.

Tests check the grammars linewise sends to llama.cpp (the action grammar, the pruner's
literals) without a model: a grammar with no recursive rule describes a regular
language, so it translates rule by rule into one regular expression. The subset read is
the one llama.cpp documents: string literals with ``\\`` escapes, character classes
(``[^…]``), ``( )``, ``|``, ``*``, ``+``, ``?``, ``{m}``/``{m,n}``, and rule names.
"""

from __future__ import annotations

import re
from functools import cache

_RULE = re.compile(r"^([a-zA-Z0-9-]+)\s*::=\s*(.*)$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "]": "]",
            "[": "[", "-": "-", "^": "^"}


class GrammarError(ValueError):
    """The grammar is outside the subset read here (or malformed)."""


def gbnf_regex(grammar: str) -> re.Pattern[str]:
    """The regular expression of ``root``: ``fullmatch`` it against a text."""
    rules: dict[str, str] = {}
    for line in grammar.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _RULE.match(line)
        if match is None:
            raise GrammarError(f"not a rule: {line!r}")
        rules[match.group(1)] = match.group(2)
    if "root" not in rules:
        raise GrammarError("the grammar has no root rule")
    return re.compile(_Translator(rules).rule("root", ()), re.DOTALL)


def admits(grammar: str, text: str) -> bool:
    """Whether ``grammar`` admits exactly ``text``."""
    return _cached_regex(grammar).fullmatch(text) is not None


@cache
def _cached_regex(grammar: str) -> re.Pattern[str]:
    return gbnf_regex(grammar)


class _Translator:
    def __init__(self, rules: dict[str, str]) -> None:
        self.rules = rules
        self.done: dict[str, str] = {}

    def rule(self, name: str, stack: tuple[str, ...]) -> str:
        if name in stack:
            raise GrammarError(f"rule {name!r} is recursive")
        if name not in self.done:
            if name not in self.rules:
                raise GrammarError(f"unknown rule {name!r}")
            self.done[name] = f"(?:{self.expression(self.rules[name], (*stack, name))})"
        return self.done[name]

    def expression(self, text: str, stack: tuple[str, ...]) -> str:
        regex, end = self._alternatives(text, 0, stack)
        if end != len(text):
            raise GrammarError(f"unexpected {text[end:]!r}")
        return regex

    def _alternatives(self, text: str, i: int, stack: tuple[str, ...]) -> tuple[str, int]:
        choices = []
        while True:
            sequence, i = self._sequence(text, i, stack)
            choices.append(sequence)
            i = _skip_space(text, i)
            if i < len(text) and text[i] == "|":
                i += 1
                continue
            return "|".join(choices), i

    def _sequence(self, text: str, i: int, stack: tuple[str, ...]) -> tuple[str, int]:
        parts: list[str] = []
        while True:
            i = _skip_space(text, i)
            if i >= len(text) or text[i] in "|)":
                return "".join(parts), i
            item, i = self._item(text, i, stack)
            if i < len(text) and text[i] in "*+?":
                item, i = f"(?:{item}){text[i]}", i + 1
            elif i < len(text) and text[i] == "{":
                close = text.index("}", i)
                item, i = f"(?:{item}){text[i:close + 1]}", close + 1
            parts.append(item)

    def _item(self, text: str, i: int, stack: tuple[str, ...]) -> tuple[str, int]:
        char = text[i]
        if char == '"':
            value, i = _literal(text, i + 1)
            return re.escape(value), i
        if char == "[":
            return _char_class(text, i + 1)
        if char == "(":
            inner, i = self._alternatives(text, i + 1, stack)
            if i >= len(text) or text[i] != ")":
                raise GrammarError("unclosed '('")
            return f"(?:{inner})", i + 1
        match = re.compile(r"[a-zA-Z0-9-]+").match(text, i)
        if match is None:
            raise GrammarError(f"unexpected {text[i:i + 20]!r}")
        return self.rule(match.group(0), stack), match.end()


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _literal(text: str, i: int) -> tuple[str, int]:
    value = []
    while i < len(text) and text[i] != '"':
        if text[i] == "\\":
            value.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            value.append(text[i])
            i += 1
    if i >= len(text):
        raise GrammarError("unclosed string literal")
    return "".join(value), i + 1


def _char_class(text: str, i: int) -> tuple[str, int]:
    negate = i < len(text) and text[i] == "^"
    i += negate
    members = []
    while i < len(text) and text[i] != "]":
        if text[i] == "\\":
            members.append(re.escape(_ESCAPES.get(text[i + 1], text[i + 1])))
            i += 2
        elif text[i] == "-" and members and i + 1 < len(text) and text[i + 1] != "]":
            members.append("-")
            i += 1
        else:
            members.append(re.escape(text[i]))
            i += 1
    if i >= len(text):
        raise GrammarError("unclosed character class")
    return f"[{'^' if negate else ''}{''.join(members)}]", i + 1
