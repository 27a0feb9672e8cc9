"""Algorithm 1 (MNDAG mining) on hand-built graphs, and its guarantees on random ones."""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from linewise.apps.pruning.graph import StateGraph, load_graph, parse_graph, save_graph
from linewise.apps.pruning.miner import mine, necessary_actions
from linewise.cli.main import main
from linewise.errors import GraphError
from linewise.runtime.log import configure_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """``main`` points structlog at the test's captured stderr, which closes after the
    test: configure it back as conftest does, or later tests fail to log."""
    yield
    configure_logging(json_lines=False, level="WARNING")


def graph(edges: str, sink: str, source: str = "I0", extra: tuple[str, ...] = ()) -> StateGraph:
    """A graph from ``"I0>A1 A1>I1 I1>A2"``; ids starting with A are actions."""
    pairs = [tuple(edge.split(">")) for edge in edges.split()]
    ids: list[str] = []
    for node_id in [source, *(n for pair in pairs for n in pair), sink, *extra]:
        if node_id not in ids:
            ids.append(node_id)
    ids.sort(key=lambda i: (int(i[1:]) if i[1:].isdigit() else 10**6, i[0]))
    return StateGraph(
        nodes=[{"id": i, "kind": "action" if i.startswith("A") else "info"} for i in ids],
        edges=pairs,
        source=source,
        sink=sink,
    )


# ------------------------------------------------------------------ hand-built graphs


def test_an_answer_that_depends_on_everything_keeps_everything() -> None:
    chain = graph("I0>A1 A1>I1 I1>A2 A2>I2 I2>A3 A3>I3 I3>A4", sink="A4")
    assert necessary_actions(chain) == ["A1", "A2", "A3", "A4"]


def test_the_sink_depending_on_actions_is_never_mined_to_the_sink_alone() -> None:
    """The start-node bug class: a miner that loses the source keeps only the answer."""
    chain = graph("I0>A1 A1>I1 I1>A2", sink="A2")
    result = mine(chain)
    assert result.necessary_actions == ["A1", "A2"]
    assert "I0" in result.necessary_nodes and result.distance("A2") == 2


def test_a_dead_end_branch_is_pruned() -> None:
    g = graph("I0>A1 A1>I1 I0>A2 A2>I2 I1>A3", sink="A3")
    assert necessary_actions(g) == ["A1", "A3"]


def test_branching_dependencies_both_survive() -> None:
    # A4 needs I1 (from A1) and I2 (from A2); A3 went nowhere useful.
    g = graph("I0>A1 A1>I1 I0>A2 A2>I2 I1>A3 A3>I3 I1>A4 I2>A4", sink="A4")
    assert necessary_actions(g) == ["A1", "A2", "A4"]


def test_deep_branches_keep_their_whole_chains() -> None:
    # Two independent two-step chains feed the answer.
    g = graph("I0>A1 A1>I1 I1>A2 A2>I2 I0>A3 A3>I3 I3>A4 A4>I4 I2>A5 I4>A5", sink="A5")
    assert necessary_actions(g) == ["A1", "A2", "A3", "A4", "A5"]


def test_a_loop_that_rediscovers_known_information_is_pruned() -> None:
    # A2 and A3 wander in a cycle and come back with I1, which A1 had already found.
    g = graph("I0>A1 A1>I1 I1>A2 A2>I2 I2>A3 A3>I1 I1>A4", sink="A4")
    assert necessary_actions(g) == ["A1", "A4"]


def test_a_cycle_back_to_the_source_is_pruned() -> None:
    # A1 shows the goal again (I0) beside I1; A2 loops back to the goal and finds nothing.
    g = graph("I0>A1 A1>I0 A1>I1 I1>A2 A2>I0 A2>I2 I1>A3", sink="A3")
    assert necessary_actions(g) == ["A1", "A3"]


def test_an_action_relying_on_a_loop_keeps_the_loop() -> None:
    # Actions pull every predecessor: if A1 is said to rely on I2, A2 (its producer) stays.
    g = graph("I0>A1 A1>I1 I1>A2 A2>I2 I2>A1 I1>A3", sink="A3")
    assert necessary_actions(g) == ["A1", "A2", "A3"]


def test_information_reached_by_two_paths_keeps_only_the_shorter() -> None:
    # I1 comes from A1 (one action) and again from A3 after A2 (three actions).
    g = graph("I0>A1 A1>I1 I0>A2 A2>I2 I2>A3 A3>I1 I1>A4", sink="A4")
    result = mine(g)
    assert result.necessary_actions == ["A1", "A4"]
    assert result.predecessor("I1") == "A1"


def test_a_shorter_later_path_beats_a_longer_earlier_one() -> None:
    # I3 is first found after A1 -> A2 (two actions), later directly by A3 (one action).
    g = graph("I0>A1 A1>I1 I1>A2 A2>I3 I0>A3 A3>I3 I3>A4", sink="A4")
    assert necessary_actions(g) == ["A3", "A4"]


def test_equally_short_paths_tie_to_the_earlier_step() -> None:
    g = graph("I0>A1 A1>I1 I0>A2 A2>I1 I1>A3", sink="A3")
    assert necessary_actions(g) == ["A1", "A3"]
    reordered = g.model_copy(update={"edges": list(reversed(g.edges))})
    assert necessary_actions(reordered) == ["A1", "A3"]


def test_a_browser_detour_to_an_irrelevant_page_and_back_is_pruned() -> None:
    # I1: the start page's links. A1 opens an irrelevant page (I2), A2 goes back and sees
    # the start page again (I1 once more); A3 fills the form it needed from the start page.
    g = graph("I0>I1 I1>A1 A1>I2 I2>A2 A2>I1 I1>A3 A3>I3 I3>A4 I0>A4", sink="A4")
    assert necessary_actions(g) == ["A3", "A4"]


def test_an_action_relying_on_unreachable_information_still_keeps_its_other_support() -> None:
    # I9 is dangling (the extractor named it but no action produced it).
    g = graph("I0>A1 A1>I1 I1>A2 I9>A2", sink="A2")
    result = mine(g)
    assert result.necessary_actions == ["A1", "A2"]
    assert "I9" in result.necessary_nodes and result.predecessor("I9") is None


def test_an_unreachable_sink_is_an_error_not_an_empty_result() -> None:
    g = graph("I0>A1 A1>I1 I5>A2", sink="A2")
    with pytest.raises(GraphError, match="'A2' cannot be reached from the source 'I0'"):
        mine(g)


def test_a_wrong_source_is_an_error() -> None:
    g = graph("I0>A1 A1>I1 I1>A2", sink="A2", source="I7", extra=("I0",))
    with pytest.raises(GraphError, match="cannot be reached"):
        mine(g)


@pytest.mark.parametrize(("data", "message"), [
    ({"nodes": [{"id": "I0", "kind": "info"}], "edges": [], "source": "I0", "sink": "A1"},
     "the sink 'A1' is not among the nodes"),
    ({"nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", "kind": "action"}],
      "edges": [["I0", "A2"]], "source": "I0", "sink": "A1"}, "unknown node 'A2'"),
    ({"nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", "kind": "action"},
                {"id": "A2", "kind": "action"}],
      "edges": [["A1", "A2"]], "source": "I0", "sink": "A2"}, "joins two actions"),
    ({"nodes": [{"id": "I0", "kind": "info"}, {"id": "I0", "kind": "action"}],
      "edges": [], "source": "I0", "sink": "I0"}, "appears twice"),
    ({"nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", "kind": "step"}],
      "edges": [], "source": "I0", "sink": "A1"}, "nodes.1.kind"),
    ({"nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", "kind": "action"}],
      "edges": [], "source": "A1", "sink": "A1"}, "source 'A1' must be an info node"),
])
def test_malformed_graphs_are_rejected_with_the_problem_named(data: dict, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        parse_graph(json.dumps(data))


def test_extra_fields_survive_a_round_trip(tmp_path: Path) -> None:
    g = StateGraph.model_validate({
        "nodes": [{"id": "I0", "kind": "info", "text": "the goal"},
                  {"id": "A1", "kind": "action", "type": "click", "goal": "open", "step": 0}],
        "edges": [["I0", "A1"]], "source": "I0", "sink": "A1", "trajectory": "run/ep",
    })
    save_graph(g, tmp_path / "g.json")
    again = load_graph(tmp_path / "g.json")
    assert again == g and again.node("A1").model_extra == {"type": "click", "goal": "open",
                                                            "step": 0}


# ------------------------------------------------------------------ linewise mine


def test_mine_command_prints_the_necessary_actions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "graph.json"
    save_graph(graph("I0>A1 A1>I1 I0>A2 A2>I2 I1>A3", sink="A3"), path)
    assert main(["mine", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["A1", "A3"]


@pytest.mark.parametrize("content", ["{not json", '{"nodes": []}',
                                     '{"nodes": [{"id": "I0", "kind": "info"}, '
                                     '{"id": "A1", "kind": "action"}], "edges": [], '
                                     '"source": "I0", "sink": "A1"}'])
def test_mine_command_rejects_a_broken_graph_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    path = tmp_path / "graph.json"
    path.write_text(content)
    assert main(["mine", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and str(path) in captured.err


def test_mine_command_names_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mine", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


# ------------------------------------------------------------------ properties


@st.composite
def trajectory_graphs(draw: st.DrawFn) -> StateGraph:
    """Graphs shaped like the extractor's: each action relies on information already
    known, and produces new information or re-finds known information (cycles)."""
    steps = draw(st.integers(min_value=1, max_value=12))
    nodes = [{"id": "I0", "kind": "info"}]
    edges: list[tuple[str, str]] = []
    known = ["I0"]
    for step in range(1, steps + 1):
        action = f"A{step}"
        nodes.append({"id": action, "kind": "action"})
        support = draw(st.lists(st.sampled_from(known), min_size=1, max_size=3, unique=True))
        edges += [(info, action) for info in support]
        if step == steps:
            break
        fresh = draw(st.integers(min_value=0, max_value=3))
        for _ in range(fresh):
            info = f"I{len(known)}"
            nodes.append({"id": info, "kind": "info"})
            known.append(info)
            edges.append((action, info))
        refound = draw(st.lists(st.sampled_from(known), max_size=2, unique=True))
        edges += [(action, info) for info in refound if (action, info) not in edges]
    return StateGraph(nodes=nodes, edges=edges, source="I0", sink=f"A{steps}")


@st.composite
def arbitrary_graphs(draw: st.DrawFn) -> StateGraph:
    """Any node-kind mix and any edges but action->action; the sink may be unreachable."""
    n_actions = draw(st.integers(min_value=1, max_value=8))
    n_info = draw(st.integers(min_value=1, max_value=8))
    infos = [f"I{i}" for i in range(n_info)]
    actions = [f"A{i + 1}" for i in range(n_actions)]
    ids = infos + actions
    allowed = [(u, v) for u in ids for v in ids
               if u != v and not (u.startswith("A") and v.startswith("A"))]
    edges = draw(st.lists(st.sampled_from(allowed), max_size=30, unique=True))
    order = draw(st.permutations(ids))
    return StateGraph(nodes=[{"id": i, "kind": "action" if i[0] == "A" else "info"}
                             for i in order],
                      edges=edges, source="I0", sink=actions[-1])


def reachable(graph: StateGraph, start: str, allowed: set[str], forward: bool = True) -> set[str]:
    step: dict[str, list[str]] = {}
    for u, v in graph.edges:
        a, b = (u, v) if forward else (v, u)
        step.setdefault(a, []).append(b)
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in step.get(queue.popleft(), []):
            if nxt in allowed and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def check_guarantees(g: StateGraph) -> None:
    result = mine(g)
    kept = set(result.necessary_nodes)
    actions = set(g.action_ids)
    assert g.sink in result.necessary_actions
    assert set(result.necessary_actions) == kept & actions
    # The kept subgraph connects the goal to the answer...
    from_source = reachable(g, g.source, kept)
    assert g.sink in from_source
    # ...and every kept action lies on such a path, inside the kept subgraph.
    to_sink = reachable(g, g.sink, kept, forward=False)
    for action in result.necessary_actions:
        assert action in from_source, f"{action} is kept but not reachable from the source"
        assert action in to_sink, f"{action} is kept but leads nowhere near the sink"
    # Edge order never changes the answer.
    shuffled = list(g.edges)
    random.Random(0).shuffle(shuffled)
    assert necessary_actions(g.model_copy(update={"edges": shuffled})) == \
        result.necessary_actions


@given(trajectory_graphs())
def test_trajectory_graphs_keep_a_connected_necessary_core(g: StateGraph) -> None:
    check_guarantees(g)


@given(arbitrary_graphs())
def test_arbitrary_graphs_keep_a_connected_core_or_fail_loudly(g: StateGraph) -> None:
    if g.sink not in reachable(g, g.source, {n.id for n in g.nodes}):
        with pytest.raises(GraphError):
            mine(g)
    else:
        check_guarantees(g)


@given(st.integers(min_value=1, max_value=30))
def test_a_pure_chain_keeps_every_action(length: int) -> None:
    edges = " ".join(f"I{k - 1}>A{k} A{k}>I{k}" for k in range(1, length)) + \
        f" I{length - 1}>A{length}"
    assert necessary_actions(graph(edges, sink=f"A{length}")) == \
        [f"A{k}" for k in range(1, length + 1)]
