"""How the MNDAG miner's time grows with the state graph.

Builds random layered graphs shaped like the extractor's output (each action relies on
a few pieces of information already known and produces a few new ones, sometimes
re-finding old ones, which makes cycles), times ``mine`` on each size, and prints a
table with the time per node and the growth ratio between consecutive sizes. Algorithm 1
is Dijkstra (O((V + E) log V)) plus a linear backward pass, so a tenfold graph should
take a little over tenfold time.

    python benchmarks/prune_scale.py                  # 10 .. 100,000 nodes
    python benchmarks/prune_scale.py --sizes 10 100 1000 10000 --repeats 7
"""

from __future__ import annotations

import argparse
import gc
import random
import time

from linewise.apps.pruning.graph import StateGraph
from linewise.apps.pruning.miner import mine


def layered_graph(n_nodes: int, seed: int = 0) -> StateGraph:
    """About ``n_nodes`` nodes: I0, then per step one action and ~2 new information nodes.

    Each action relies on 1-3 pieces of information from the last few layers (and now
    and then on older ones); a fifth of the actions also re-find something already known.
    """
    rng = random.Random(seed)
    nodes: list[dict[str, str]] = [{"id": "I0", "kind": "info"}]
    edges: list[tuple[str, str]] = []
    known = ["I0"]
    step = 0
    while len(nodes) < n_nodes - 1:
        step += 1
        action = f"A{step}"
        nodes.append({"id": action, "kind": "action"})
        recent = known[-8:]
        support = set(rng.sample(recent, k=min(len(recent), rng.randint(1, 3))))
        if rng.random() < 0.1:
            support.add(rng.choice(known))
        edges += [(info, action) for info in sorted(support)]
        for _ in range(rng.randint(1, 3)):
            if len(nodes) >= n_nodes - 1:
                break
            info = f"I{len(known)}"
            nodes.append({"id": info, "kind": "info"})
            known.append(info)
            edges.append((action, info))
        if rng.random() < 0.2:
            edges.append((action, rng.choice(known[:-1])))
    step += 1
    sink = f"A{step}"
    nodes.append({"id": sink, "kind": "action"})
    edges += [(info, sink) for info in known[-3:]]
    return StateGraph.model_validate(
        {"nodes": nodes, "edges": edges, "source": "I0", "sink": sink})


def time_mining(graph: StateGraph, repeats: int) -> float:
    """Fastest CPU seconds of ``mine(graph)`` over ``repeats`` runs (after one warm-up).

    CPU time of this process and the minimum, not wall time and the median: on a shared
    machine the slower runs measure the other processes, and the fastest is the best
    estimate of the miner's own cost.
    """
    mine(graph)
    times = []
    for _ in range(repeats):
        gc.collect()
        started = time.process_time()
        mine(graph)
        times.append(time.process_time() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10, 100, 1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    print(f"{'nodes':>8} {'edges':>8} {'kept':>6} {'cpu ms':>10} {'us/node':>8} "
          f"{'x time':>7} {'x nodes':>8}")
    previous: tuple[int, float] | None = None
    for size in args.sizes:
        graph = layered_graph(size)
        seconds = time_mining(graph, args.repeats)
        kept = len(mine(graph).necessary_actions)
        n = len(graph.nodes)
        growth = f"{seconds / previous[1]:7.1f} {n / previous[0]:8.1f}" if previous else \
            f"{'':>7} {'':>8}"
        print(f"{n:>8} {len(graph.edges):>8} {kept:>6} {seconds * 1000:>10.3f} "
              f"{seconds * 1e6 / n:>8.2f} {growth}")
        previous = (n, seconds)


if __name__ == "__main__":
    main()
