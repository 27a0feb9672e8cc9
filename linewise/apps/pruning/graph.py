"""The state graph: information and action nodes joined by dependency edges.

One schema for every graph the pruner handles — built by the extractor, written to the
dataset folder, read back by ``linewise mine``::

    {"nodes": [{"id": "I0", "kind": "info"}, {"id": "A1", "kind": "action"}, ...],
     "edges": [["I0", "A1"], ["A1", "I1"], ...],
     "source": "I0", "sink": "A7"}

Nodes and the graph accept extra fields (the extractor stores an action's type, goal and
step, an information node's text), so a graph file stays readable by people and tools.

Validation names the first problem it finds, because a graph that is slightly wrong (a
misspelt source id, an edge to a node that does not exist) would otherwise be mined into
a silently empty result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from linewise.errors import GraphError

NodeKind = Literal["info", "action"]


class GraphNode(BaseModel):
    """One vertex; ``kind`` decides its cost in the miner (action 1, information 0)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    kind: NodeKind


class StateGraph(BaseModel):
    """A state graph with its source (the goal, I0) and sink (the final action).

    Edges run information -> action (the action relied on it), action -> information (the
    action produced it) or information -> information (derived from it: the pruner hangs
    the start page's information under I0). An edge between two actions is rejected: an
    action depends on what it knew, never directly on another action, and the miner's
    guarantees (every kept action lies on a path from source to sink) rest on that.
    """

    model_config = ConfigDict(extra="allow")

    nodes: list[GraphNode]
    edges: list[tuple[str, str]] = Field(default_factory=list)
    source: str
    sink: str

    @model_validator(mode="after")
    def _check(self) -> StateGraph:
        kinds: dict[str, NodeKind] = {}
        for node in self.nodes:
            if node.id in kinds:
                raise ValueError(f"node id {node.id!r} appears twice")
            kinds[node.id] = node.kind
        for where, node_id, kind in (("source", self.source, "info"),
                                     ("sink", self.sink, "action")):
            if node_id not in kinds:
                raise ValueError(f"the {where} {node_id!r} is not among the nodes")
            if kinds[node_id] != kind:
                raise ValueError(f"the {where} {node_id!r} must be an {kind} node, "
                                 f"not {kinds[node_id]}")
        for number, (start, end) in enumerate(self.edges):
            for end_id in (start, end):
                if end_id not in kinds:
                    raise ValueError(f"edge {number} [{start!r}, {end!r}] names the unknown "
                                     f"node {end_id!r}")
            if kinds[start] == "action" and kinds[end] == "action":
                raise ValueError(f"edge {number} [{start!r}, {end!r}] joins two actions; an "
                                 "action can only depend on information")
        return self

    @property
    def action_ids(self) -> list[str]:
        return [n.id for n in self.nodes if n.kind == "action"]

    def node(self, node_id: str) -> GraphNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)


def parse_graph(text: str, origin: str = "graph") -> StateGraph:
    """A graph from JSON text; ``GraphError`` names what is wrong and where."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphError(f"{origin}: not JSON: {exc}") from exc
    try:
        return StateGraph.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'graph'}: {err['msg']}"
            for err in exc.errors()
        )
        raise GraphError(f"{origin}: not a state graph: {problems}") from exc


def load_graph(path: Path) -> StateGraph:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GraphError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse_graph(text, str(path))


def save_graph(graph: StateGraph, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(graph.model_dump_json(indent=2), encoding="utf-8")
