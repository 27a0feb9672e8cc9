"""Structure figures of a package: modules, import layers, imports running upward, cycles.

    python benchmarks/import_layers.py linewise.agent.filters
    python benchmarks/import_layers.py linewise

The import graph is grimp's (import-linter's): every ``import`` in a module counts,
those inside functions and under ``TYPE_CHECKING`` included (``--runtime-only`` leaves
the ``TYPE_CHECKING`` ones out).

- *modules*: the ``.py`` files under the package, ``__init__`` files left out;
- *import layers*: the longest chain of imports between the package's modules (a module
  importing none of them is layer 1, one importing only layer-1 modules layer 2, …),
  cycles condensed to one node;
- *imports running upward*: an import whose target is in the same or a higher layer
  than the module importing it, which only an import inside a cycle can be; and imports
  out of a sub-package into a module of a package enclosing it (``a/b/c.py`` importing
  ``a/d.py``), counted apart;
- *cycles*: groups of sibling modules or sub-packages, at any depth, that import one
  another (what import-linter's ``acyclic_siblings`` contract forbids), and groups of
  modules importing one another.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import grimp


def _sccs(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def figures(package: str, *, runtime_only: bool = False) -> dict[str, object]:
    root = package.split(".")[0]
    graph = grimp.build_graph(root, exclude_type_checking_imports=runtime_only)
    inside = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    packages = {m for m in inside if any(o.startswith(m + ".") for o in inside)}
    modules = [m for m in inside if m not in packages]
    edges: dict[str, set[str]] = {
        m: {t for t in graph.find_modules_directly_imported_by(m) if t in inside and t != m}
        for m in inside
    }
    # layers on the condensed graph: a cycle is one node
    components = _sccs(inside, edges)
    component_of = {m: i for i, c in enumerate(components) for m in c}
    condensed = {i: {component_of[t] for m in c for t in edges[m]} - {i}
                 for i, c in enumerate(components)}
    layer: dict[int, int] = {}

    def layer_of(node: int) -> int:
        if node not in layer:
            layer[node] = 1 + max((layer_of(t) for t in condensed[node]), default=0)
        return layer[node]

    for node in condensed:
        layer_of(node)
    upward_in_cycles = sum(1 for m in inside for t in edges[m]
                           if component_of[t] == component_of[m])
    enclosing = sum(
        1 for m in inside for t in edges[m]
        if t.rsplit(".", 1)[0] != m.rsplit(".", 1)[0] and m.startswith(t.rsplit(".", 1)[0] + ".")
        and t not in packages and t.count(".") < m.count(".")
    )
    # sibling cycles, at any depth
    children: dict[str, set[str]] = defaultdict(set)
    for m in inside:
        if m != package:
            children[m.rsplit(".", 1)[0]].add(m)
    sibling_cycles: list[list[str]] = []
    for _parent, kids in sorted(children.items()):
        def child_of(module: str, kids: set[str] = kids) -> str | None:
            for kid in kids:
                if module == kid or module.startswith(kid + "."):
                    return kid
            return None
        sibling_edges: dict[str, set[str]] = defaultdict(set)
        for m in inside:
            source = child_of(m)
            if source is None:
                continue
            for t in edges[m]:
                target = child_of(t)
                if target is not None and target != source:
                    sibling_edges[source].add(target)
        sibling_cycles += [c for c in _sccs(sorted(kids), sibling_edges) if len(c) > 1]
    return {
        "package": package,
        "modules": len(modules),
        "packages": len(packages),
        "import_layers": max(layer.values(), default=0),
        "imports": sum(len(e) for e in edges.values()),
        "imports_running_upward": upward_in_cycles,
        "imports_into_an_enclosing_package": enclosing,
        "module_cycles": [c for c in components if len(c) > 1],
        "sibling_cycles": sibling_cycles,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+")
    parser.add_argument("--runtime-only", action="store_true",
                        help="leave out the imports under TYPE_CHECKING")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for package in args.packages:
        found = figures(package, runtime_only=args.runtime_only)
        if args.json:
            print(json.dumps(found, indent=2))
            continue
        print(f"{package}: {found['modules']} modules in {found['packages']} packages, "
              f"{found['import_layers']} import layers, {found['imports']} imports, "
              f"{found['imports_running_upward']} running upward (in cycles), "
              f"{found['imports_into_an_enclosing_package']} into an enclosing package, "
              f"{len(found['module_cycles'])} module cycles, "  # type: ignore[arg-type]
              f"{len(found['sibling_cycles'])} sibling cycles")  # type: ignore[arg-type]
        for cycle in [*found["module_cycles"], *found["sibling_cycles"]]:  # type: ignore[misc]
            print("  cycle:", " <-> ".join(cycle))


if __name__ == "__main__":
    main()
