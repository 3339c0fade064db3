"""The stage graph: a small directed graph of stage ids, in insertion order.

A plan needs a handful of operations (add, edges, ancestors, a stable topological
order); networkx has them all but importing it loads ~350 modules, about a fifth
of a fully cached run's time, for graphs of a few dozen nodes. The subset of
networkx's `DiGraph` API used here keeps its names and meaning::

    graph.add_node("a", stage=s); graph.add_edge("a", "b")   # "b" added if new
    "a" in graph; list(graph); len(graph); graph.nodes["a"]["stage"]
    graph.nodes(data=True); graph.edges; graph.predecessors("b"); graph.ancestors("b")
    graph.topological_order()   # ties broken by insertion order: stable output
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any


class NodeView:
    """`graph.nodes`: iterate the ids, `nodes[id]` their data, `nodes(data=True)` pairs."""

    def __init__(self, data: dict[str, dict[str, Any]]) -> None:
        self._data = data

    def __getitem__(self, node: str) -> dict[str, Any]:
        return self._data[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, node: object) -> bool:
        return node in self._data

    def __call__(self, data: bool = False) -> Iterator[Any]:
        return iter(self._data.items()) if data else iter(self._data)


class StageGraph:
    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}
        self._succ: dict[str, dict[str, None]] = {}  # dicts as ordered sets
        self._pred: dict[str, dict[str, None]] = {}

    def add_node(self, node: str, **data: Any) -> None:
        if node not in self._data:
            self._data[node] = {}
            self._succ[node] = {}
            self._pred[node] = {}
        self._data[node].update(data)

    def add_nodes_from(self, nodes: Iterable[tuple[str, dict[str, Any]]]) -> None:
        for node, data in nodes:
            self.add_node(node, **data)

    def add_edge(self, a: str, b: str) -> None:
        self.add_node(a)
        self.add_node(b)
        self._succ[a][b] = None
        self._pred[b][a] = None

    def add_edges_from(self, edges: Iterable[tuple[str, str]]) -> None:
        for a, b in edges:
            self.add_edge(a, b)

    @property
    def nodes(self) -> NodeView:
        return NodeView(self._data)

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(a, b) for a, succ in self._succ.items() for b in succ]

    def __contains__(self, node: object) -> bool:
        return node in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def predecessors(self, node: str) -> Iterator[str]:
        return iter(self._pred[node])

    def successors(self, node: str) -> Iterator[str]:
        return iter(self._succ[node])

    def ancestors(self, node: str) -> set[str]:
        """Every node with a path to `node` (not `node` itself)."""
        seen: set[str] = set()
        todo = list(self._pred[node])
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self._pred[current])
        return seen

    def topological_order(self) -> list[str]:
        """Kahn's algorithm, always taking the earliest-inserted ready node (networkx's
        `lexicographical_topological_sort` keyed by insertion position)."""
        position = {node: i for i, node in enumerate(self._data)}
        waiting = {node: len(pred) for node, pred in self._pred.items()}
        ready = [position[n] for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        nodes = list(self._data)
        order = []
        while ready:
            node = nodes[heapq.heappop(ready)]
            order.append(node)
            for after in self._succ[node]:
                waiting[after] -= 1
                if waiting[after] == 0:
                    heapq.heappush(ready, position[after])
        if len(order) != len(nodes):
            stuck = sorted(n for n, count in waiting.items() if count > 0)
            raise ValueError(f"the stage graph has a cycle through {', '.join(stuck)}")
        return order
