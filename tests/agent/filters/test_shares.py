"""Budget sharing (:mod:`linewise.agent.filters.stages.shares`): each stage's best candidates keep
a place in the view, round-robin across stages, within the reserved tokens."""

from __future__ import annotations

from linewise.agent.filters.base import FilterInput
from linewise.agent.filters.focus import FocusConfig, FocusFilter
from linewise.agent.filters.stages.groups import Group
from linewise.agent.filters.stages.shares import reserved_lines
from linewise.agent.filters.view.tree import LineTree
from linewise.tokens import count_tokens
from tests.support.trees import line_of, tree_lines


def _groups(lines: list[str]) -> tuple[list[Group], int]:
    zip_entry = line_of(lines, r"term 'zip\(")
    lexical = [Group("lexical", tuple(range(start, start + 5)))
               for start in range(100, 600, 100)]
    return [*lexical, Group("passages", (zip_entry,))], zip_entry


def test_every_stage_keeps_its_best_group_before_another_stages_second() -> None:
    lines = tree_lines("docs-functions.txt")
    groups, zip_entry = _groups(lines)
    tree = LineTree(lines)
    first_two = sum(count_tokens(lines[i] + "\n") for i in (*groups[0].lines, zip_entry))
    kept = reserved_lines(tree, groups, first_two + 60)
    assert zip_entry in kept  # the late stage's only group, though five others came first
    assert set(groups[0].lines) <= kept
    assert not set(groups[1].lines) & kept  # the first stage's second group did not fit


def test_the_guard_is_not_reserved_and_nothing_fits_in_no_budget() -> None:
    lines = tree_lines("docs-functions.txt")
    tree = LineTree(lines)
    assert reserved_lines(tree, [Group("guard", (5, 6))], 10_000) == set()
    groups, _ = _groups(lines)
    assert reserved_lines(tree, groups, 0) == set()


async def test_the_shared_preset_keeps_reserved_lines_within_its_view_budget() -> None:
    lines = tree_lines("docs-functions.txt")
    observation = FilterInput(
        goal="Which built-in pairs up the items of several iterables?", lines=lines)
    config = FocusConfig.from_preset("shared-items")
    assert config.reserve_share == 0.4 and config.items and config.chooser == "none"
    result = await FocusFilter(None, config, name="focus-shared-items").apply(observation)
    assert result.notes["reserved_lines"] > 0
    assert result.tokens_shown <= config.view_budget_tokens * 1.05
    assert any("term 'zip(" in line for line in result.text.splitlines())
