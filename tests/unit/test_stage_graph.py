"""plan/graph.py: the subset of networkx's DiGraph the planner uses, same answers."""

from __future__ import annotations

import random

import pytest

from edgebuild.plan.graph import StageGraph


def test_order_is_topological_with_ties_in_insertion_order() -> None:
    graph = StageGraph()
    for node in ("export", "optimize", "compile@b", "compile@a", "latency@a"):
        graph.add_node(node, stage=node.upper())
    graph.add_edges_from([("export", "optimize"), ("optimize", "compile@b"),
                          ("optimize", "compile@a"), ("compile@a", "latency@a")])
    assert graph.topological_order() == ["export", "optimize", "compile@b", "compile@a",
                                         "latency@a"]
    assert graph.ancestors("latency@a") == {"export", "optimize", "compile@a"}
    assert list(graph.predecessors("compile@a")) == ["optimize"]
    assert graph.nodes["compile@a"]["stage"] == "COMPILE@A"
    assert dict(graph.nodes(data=True))["export"] == {"stage": "EXPORT"}
    assert len(graph) == 5 and "export" in graph and list(graph) == list(graph.nodes)


def test_a_cycle_is_named() -> None:
    graph = StageGraph()
    graph.add_edges_from([("a", "b"), ("b", "a"), ("c", "a")])
    with pytest.raises(ValueError, match="cycle through a, b"):
        graph.topological_order()


def test_agrees_with_networkx_on_random_dags() -> None:
    nx = pytest.importorskip("networkx")
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(1, 30)
        nodes = [f"s{i}" for i in rng.sample(range(n), n)]  # insertion order != names
        ours, theirs = StageGraph(), nx.DiGraph()
        for node in nodes:
            ours.add_node(node)
            theirs.add_node(node)
        ranked = rng.sample(nodes, n)  # edges follow another order than insertion
        for i, a in enumerate(ranked):
            for b in ranked[i + 1:]:
                if rng.random() < 0.15:
                    ours.add_edge(a, b)
                    theirs.add_edge(a, b)
        position = {s: i for i, s in enumerate(nodes)}
        assert ours.topological_order() == list(
            nx.lexicographical_topological_sort(theirs, key=position.__getitem__))
        assert sorted(ours.edges) == sorted(theirs.edges)
        for node in nodes:
            assert ours.ancestors(node) == nx.ancestors(theirs, node)
