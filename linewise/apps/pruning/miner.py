"""Minimum necessary DAG mining: Algorithm 1 of the WebClipper paper, as a pure function.

Step 1, forward: Dijkstra from the source, where entering a node costs 1 for an action
and 0 for information, gives every node its fewest-actions distance ``d(v)`` and its
predecessor ``p(v)`` on one such shortest path.

Step 2, backward: from the sink, an action pulls in *all* its predecessors (everything it
relied on is necessary: this keeps branching dependencies), an information node pulls in
only ``p(v)`` (one cheapest way of having learnt it is enough: this drops detours, loops
and later re-discoveries of the same fact).

Step 3: the necessary actions are the actions that step 2 reached.

Ties between equally short predecessors go to the one settled first: lower distance,
then earlier in the node list (for the pruner's graphs, earlier in the trajectory), so
the result never depends on the order of the edges. O((V + E) log V) with a binary heap.

Unlike the paper's public code, a sink that the source cannot reach is an error
(``GraphError``), not an empty answer: an empty or sink-only trajectory is exactly the
symptom of a wrong start node, and it must not reach a training set unnoticed.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from linewise.apps.pruning.graph import StateGraph
from linewise.errors import GraphError

INFINITY = float("inf")


@dataclass(frozen=True)
class MiningResult:
    """What Algorithm 1 found. Ids are listed in the graph's node order."""

    necessary_actions: list[str]
    """A*: the actions to keep, the sink included."""
    necessary_nodes: list[str]
    """V*: every node the backward closure reached (actions and information)."""
    _index: dict[str, int] = field(repr=False)
    _ids: list[str] = field(repr=False)
    _distance: list[int] = field(repr=False)
    _previous: list[int] = field(repr=False)

    def distance(self, node_id: str) -> float:
        """d(v): fewest actions on a path from the source (inf where unreachable)."""
        value = self._distance[self._index[node_id]]
        return float(value) if value >= 0 else INFINITY

    def predecessor(self, node_id: str) -> str | None:
        """p(v) on the chosen shortest path (None at the source or where unreachable)."""
        position = self._previous[self._index[node_id]]
        return self._ids[position] if position >= 0 else None


def mine(graph: StateGraph) -> MiningResult:
    """Run Algorithm 1 on ``graph``; raise ``GraphError`` if the sink is unreachable."""
    ids = [node.id for node in graph.nodes]
    index = {node_id: position for position, node_id in enumerate(ids)}
    is_action = [node.kind == "action" for node in graph.nodes]
    starts = [index[start] for start, _ in graph.edges]
    ends = [index[end] for _, end in graph.edges]
    successors = _Adjacency(len(ids), starts, ends)
    predecessors = _Adjacency(len(ids), ends, starts)
    source, sink = index[graph.source], index[graph.sink]

    distance, previous = _dijkstra(source, successors, is_action)
    if distance[sink] < 0:
        raise GraphError(
            f"the sink {graph.sink!r} cannot be reached from the source {graph.source!r}: "
            "no chain of edges leads from the goal to the final action"
        )

    kept = _backward_closure(sink, predecessors, previous, is_action)
    return MiningResult(
        necessary_actions=[ids[i] for i in range(len(ids)) if kept[i] and is_action[i]],
        necessary_nodes=[ids[i] for i in range(len(ids)) if kept[i]],
        _index=index,
        _ids=ids,
        _distance=distance,
        _previous=previous,
    )


def necessary_actions(graph: StateGraph) -> list[str]:
    """A*, the ids of the actions to keep (see ``mine``)."""
    return mine(graph).necessary_actions


class _Adjacency:
    """Compressed adjacency lists (CSR): ``targets[offsets[u]:offsets[u + 1]]``.

    Two flat lists of ints instead of one list per node: at 100,000 nodes, a list per node
    makes the garbage collector rescan the heap again and again while they are created,
    which is what made mining grow faster than linearly.
    """

    __slots__ = ("offsets", "targets")

    def __init__(self, count: int, starts: list[int], ends: list[int]) -> None:
        offsets = [0] * (count + 1)
        for u in starts:
            offsets[u + 1] += 1
        for u in range(count):
            offsets[u + 1] += offsets[u]
        fill = offsets[:-1]
        targets = [0] * len(starts)
        for u, v in zip(starts, ends, strict=True):
            targets[fill[u]] = v
            fill[u] += 1
        self.offsets = offsets
        self.targets = targets

    def of(self, u: int) -> list[int]:
        return self.targets[self.offsets[u]:self.offsets[u + 1]]


def _dijkstra(
    source: int, successors: _Adjacency, is_action: list[bool]
) -> tuple[list[int], list[int]]:
    """Node-weighted shortest paths: entering ``v`` costs 1 if it is an action, else 0.

    Distances are whole numbers of actions (-1: unreachable). A heap entry is the single
    int ``distance * count + node``, which orders by distance, then node index, without
    a tuple per push; a predecessor is replaced only by a strictly shorter path. Together
    these make ties deterministic.
    """
    count = len(is_action)
    distance = [-1] * count
    previous = [-1] * count
    distance[source] = 1 if is_action[source] else 0
    heap = [distance[source] * count + source]
    settled = bytearray(count)
    offsets, targets = successors.offsets, successors.targets
    while heap:
        dist_u, u = divmod(heapq.heappop(heap), count)
        if settled[u]:
            continue
        settled[u] = 1
        for position in range(offsets[u], offsets[u + 1]):
            v = targets[position]
            if settled[v]:
                continue
            candidate = dist_u + 1 if is_action[v] else dist_u
            if distance[v] < 0 or candidate < distance[v]:
                distance[v] = candidate
                previous[v] = u
                heapq.heappush(heap, candidate * count + v)
    return distance, previous


def _backward_closure(
    sink: int, predecessors: _Adjacency, previous: list[int], is_action: list[bool]
) -> bytearray:
    """V*: from the sink, actions pull every predecessor, information only p(v)."""
    kept = bytearray(len(is_action))
    kept[sink] = 1
    queue = deque([sink])
    while queue:
        v = queue.popleft()
        if is_action[v]:
            pulled = predecessors.of(v)
        elif previous[v] >= 0:
            pulled = [previous[v]]
        else:
            continue
        for u in pulled:
            if not kept[u]:
                kept[u] = 1
                queue.append(u)
    return kept
