"""The plan's DAG: stage ids, their `Stage`, and who feeds whom, in insertion order.

A plan has a few dozen nodes and is walked a handful of times per run, so it needs
three things: insertion-ordered nodes and edges, the ancestors of a node, and a
topological order whose ties are broken by a key. Importing networkx for that cost a
fully cached run ≈ 0.1–0.2 s of its ≈ 0.9 s (issue 38), so this is the small subset of
`networkx.DiGraph` the planner and the search waves use, with the same iteration order
(nodes as added; an edge's end added as a node when new; edges by source node, then by
the order each successor was added), so `Plan.order` is the order it was.
`tests/unit/test_plan_graph.py` checks it against networkx on the plans of the shipped
recipes::

    a ─┬─ b ── d        nodes: a b c d    edges: (a,b) (a,c) (b,d)
       └─ c             order(key=position): a b c d ; ancestors(d) = {a, b}
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from edgebuild.errors import PlanError


class _Nodes:
    """`graph.nodes`: iterate the ids, `nodes[id]` is the node's attribute dict, and
    `nodes(data=True)` yields (id, attributes) pairs, as networkx's node view."""

    def __init__(self, attrs: dict[str, dict[str, Any]]) -> None:
        self._attrs = attrs

    def __getitem__(self, node: str) -> dict[str, Any]:
        return self._attrs[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def __contains__(self, node: object) -> bool:
        return node in self._attrs

    def __call__(self, data: bool = False) -> Iterator[Any]:
        return iter(self._attrs.items()) if data else iter(self._attrs)


class StageGraph:
    """A directed graph of stage ids; nothing here removes a node or an edge."""

    def __init__(self) -> None:
        self._attrs: dict[str, dict[str, Any]] = {}
        self._succ: dict[str, dict[str, None]] = {}  # dicts: ordered sets
        self._pred: dict[str, dict[str, None]] = {}

    @property
    def nodes(self) -> _Nodes:
        return _Nodes(self._attrs)

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(a, b) for a, after in self._succ.items() for b in after]

    def __contains__(self, node: object) -> bool:
        return node in self._attrs

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def add_node(self, node: str, **attrs: Any) -> None:
        if node not in self._attrs:
            self._attrs[node] = {}
            self._succ[node] = {}
            self._pred[node] = {}
        self._attrs[node].update(attrs)

    def add_nodes_from(self, nodes: Iterable[tuple[str, dict[str, Any]]]) -> None:
        for node, attrs in nodes:
            self.add_node(node, **attrs)

    def add_edge(self, source: str, dest: str) -> None:
        for node in (source, dest):
            if node not in self._attrs:
                self.add_node(node)
        self._succ[source][dest] = None
        self._pred[dest][source] = None

    def add_edges_from(self, edges: Iterable[tuple[str, str]]) -> None:
        for source, dest in edges:
            self.add_edge(source, dest)

    def predecessors(self, node: str) -> Iterator[str]:
        return iter(self._pred[node])

    def successors(self, node: str) -> Iterator[str]:
        return iter(self._succ[node])

    def ancestors(self, node: str) -> set[str]:
        """Every node with a path to `node` (not `node` itself)."""
        found: set[str] = set()
        todo = list(self._pred[node])
        while todo:
            current = todo.pop()
            if current not in found:
                found.add(current)
                todo.extend(self._pred[current])
        return found

    def ordered(self, key: Callable[[str], Any]) -> list[str]:
        """Topological order, the ready node with the smallest `key` first (ties by
        insertion): networkx's `lexicographical_topological_sort`."""
        position = {n: i for i, n in enumerate(self._attrs)}
        waiting = {n: len(p) for n, p in self._pred.items() if p}
        ready: list[tuple[Any, int, str]] = [
            (key(n), position[n], n) for n, p in self._pred.items() if not p]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            _, _, node = heapq.heappop(ready)
            for child in self._succ[node]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    del waiting[child]
                    heapq.heappush(ready, (key(child), position[child], child))
            order.append(node)
        if waiting:
            raise PlanError(f"the plan has a cycle through {', '.join(sorted(waiting))}",
                            "report this: the planner only adds edges to new stages")
        return order
