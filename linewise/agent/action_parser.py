"""Turn the model's action text into a checked call of an allowlisted action.

The text is parsed with ``ast`` and never executed: it must be exactly one call of a
registered action (of the ``ActionSet`` the prompt offered) whose arguments are
literals (strings, numbers, booleans, None, and lists, tuples or dicts of those).
Arguments are bound to the action's signature and validated against its type hints, so
``click(12)`` and ``__import__('os').system('x')`` get told precisely what is wrong.
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections.abc import Collection
from functools import cache
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from linewise.agent.actions import (
    REGISTRY,
    ActionFunction,
    ActionSet,
    ActionSpec,
    action_parameters,
    action_spec,
    example_placeholders,
    render_signature,
)
from linewise.errors import ActionParseError

_MAX_ACTION_CHARS = 20_000


class ParsedAction(BaseModel):
    """One validated call: the action's name and its bound keyword arguments."""

    name: str
    arguments: dict[str, Any]

    def __str__(self) -> str:
        """Canonical call text: positional while no argument is skipped, then keywords."""
        parts: list[str] = []
        skipped = False
        for param in self.spec.parameters:
            if param.name not in self.arguments:
                skipped = True
                continue
            value = repr(self.arguments[param.name])
            parts.append(f"{param.name}={value}" if skipped else value)
        return f"{self.name}({', '.join(parts)})"

    @property
    def spec(self) -> ActionSpec:
        """The action called, with its properties (``ActionSpec``)."""
        return action_spec(self.name)

    @property
    def bids(self) -> list[str]:
        """The element ids this action names (for filters that must keep them visible)."""
        return [v for k, v in self.arguments.items() if k.endswith("bid") and isinstance(v, str)]


def parse_action(text: str, action_names: Collection[str] | None = None) -> ParsedAction:
    """Parse and validate one action call, or raise ``ActionParseError`` saying why.

    Args:
        text: the action as the model wrote it, e.g. ``click('12')``.
        action_names: the actions the prompt offered (the task's ``ActionSet``, or their
            names); a call of any other is refused. ``None`` or empty: the standard
            vocabulary (``ActionSet.standard``).

    Raises:
        ActionParseError: the text is not one call of an allowed action with valid
            literal arguments.
        ValueError: ``action_names`` names an action that does not exist.
    """
    allowed = ActionSet.of(action_names)
    source = _strip_code_fence(text)
    if not source:
        raise ActionParseError("The action is empty. Give exactly one call, e.g. click('12').")
    if len(source) > _MAX_ACTION_CHARS:
        raise ActionParseError(f"The action is {len(source)} characters long; that is not a call.")
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        raise ActionParseError(f"The action is not valid Python call syntax: {exc.msg}.") from exc
    if len(module.body) != 1:
        raise ActionParseError(
            f"Give exactly one action per step; found {len(module.body)} statements."
        )
    statement = module.body[0]
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        raise ActionParseError("The action must be a single function call, e.g. click('12').")
    call = statement.value
    if not isinstance(call.func, ast.Name):
        raise ActionParseError(
            f"Only the listed action functions can be called, not {ast.unparse(call.func)!r}."
        )
    name = call.func.id
    spec = allowed.get(name)
    if spec is None:
        problem = f"Action {name!r} is not available here" if name in REGISTRY else (
            f"Unknown action {name!r}"
        )
        raise ActionParseError(f"{problem}. Available actions: {', '.join(allowed)}.")
    positional = [_literal(arg, name) for arg in call.args]
    keywords: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ActionParseError(f"{name}: '**' arguments are not allowed.")
        keywords[keyword.arg] = _literal(keyword.value, name)
    return ParsedAction(name=name, arguments=_bind(spec.function, name, positional, keywords))


def _strip_code_fence(text: str) -> str:
    source = text.strip()
    if source.startswith("```"):
        source = source.split("\n", 1)[1] if "\n" in source else ""
        source = source.rsplit("```", 1)[0]
    return source.strip().strip("`").strip()


def _literal(node: ast.expr, name: str) -> Any:
    if isinstance(node, ast.Starred):
        raise ActionParseError(f"{name}: '*' arguments are not allowed.")
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ActionParseError(
            f"{name}: argument {ast.unparse(node)!r} is not a literal value; "
            "use plain strings and numbers, e.g. click('12')."
        ) from exc


def _bind(
    fn: ActionFunction, name: str, positional: list[Any], keywords: dict[str, Any]
) -> dict[str, Any]:
    params = action_parameters(fn)
    signature = inspect.Signature(params)
    try:
        bound = signature.bind(*positional, **keywords)
    except TypeError as exc:
        raise ActionParseError(f"{name}: {exc}. Expected {render_signature(fn)}.") from exc
    hints = _type_hints(fn)
    checked: dict[str, Any] = {}
    for param_name, value in bound.arguments.items():
        if param_name.endswith("bid") and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # click(12) means click('12')
        try:
            checked[param_name] = _adapter(hints[param_name]).validate_python(value)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise ActionParseError(
                f"{name}: argument {param_name}={value!r} is invalid ({problem})."
            ) from exc
        if isinstance(value, str) and value.strip() in example_placeholders(fn):
            raise ActionParseError(
                f"{name}: {param_name}={value!r} is the example's placeholder, not a value. "
                f"Replace it with {value.strip()[1:-1]}."
            )
    return checked


@cache
def _type_hints(fn: ActionFunction) -> dict[str, Any]:
    return typing.get_type_hints(fn)


@cache
def _adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)
