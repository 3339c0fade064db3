"""The plan's own DAG (plan/graph.py) walks as networkx's DiGraph did: the same node and
edge order, ancestors and tie-broken topological order, on random DAGs and on the plans
of the shipped recipes (networkx is a test-time reference only: the CLI no longer
imports it)."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import pytest

from edgebuild.errors import PlanError
from edgebuild.plan.graph import StageGraph
from edgebuild.plan.planner import build_plan
from edgebuild.recipe.loader import load_recipe

REPO = Path(__file__).resolve().parents[2]


def _both(edges: list[tuple[str, str]], lone: list[str]) -> tuple[StageGraph, nx.DiGraph]:
    ours, theirs = StageGraph(), nx.DiGraph()
    for graph in (ours, theirs):
        for node in lone:
            graph.add_node(node, stage=node.upper())
        graph.add_edges_from(edges)
    return ours, theirs


def _same(ours: StageGraph, theirs: nx.DiGraph) -> None:
    assert list(ours) == list(theirs)
    assert list(ours.nodes(data=True)) == list(theirs.nodes(data=True))
    assert list(ours.edges) == list(theirs.edges)
    position = {s: i for i, s in enumerate(theirs)}
    for key in (position.__getitem__, lambda s: -position[s], lambda s: s[::-1]):
        assert ours.ordered(key) == list(nx.lexicographical_topological_sort(theirs, key=key))
    for node in theirs:
        assert ours.ancestors(node) == nx.ancestors(theirs, node)
        assert list(ours.predecessors(node)) == list(theirs.predecessors(node))


@pytest.mark.parametrize("seed", range(25))
def test_random_dags_walk_as_networkx(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"s{rng.randrange(10**6)}-{i}" for i in range(rng.randrange(2, 40))]
    # Edges only from an earlier name to a later one: a DAG, added in shuffled order
    # (some ends new to the graph when their edge is added, as networkx allows).
    edges = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if rng.random() < 0.15]
    rng.shuffle(edges)
    lone = rng.sample(names, len(names) // 2)
    _same(*_both(edges, lone))


def test_a_node_added_again_keeps_its_place_and_updates_its_attributes() -> None:
    ours, theirs = _both([("a", "b"), ("b", "c")], ["c", "a"])
    for graph in (ours, theirs):
        graph.add_node("c", stage="new")
        graph.add_edge("a", "b")  # an edge again: still one
    _same(ours, theirs)
    assert ours.nodes["c"] == {"stage": "new"}


def test_a_cycle_is_a_plan_error() -> None:
    graph = StageGraph()
    graph.add_edges_from([("a", "b"), ("b", "c"), ("c", "b")])
    with pytest.raises(PlanError, match="cycle through b, c"):
        graph.ordered(str)


@pytest.mark.parametrize("recipe", ["quickstart.yaml", "fashion-mnist.yaml"])
def test_shipped_plans_order_as_networkx(recipe: str) -> None:
    path = REPO / "recipes" / recipe
    if not path.is_file():
        pytest.skip(f"no recipes/{recipe} in this tree")
    plan = build_plan(load_recipe(path))
    theirs = nx.DiGraph()
    theirs.add_nodes_from(plan.graph.nodes(data=True))
    theirs.add_edges_from(plan.graph.edges)
    _same(plan.graph, theirs)
    position = {s: i for i, s in enumerate(theirs)}
    expected = nx.lexicographical_topological_sort(theirs, key=position.__getitem__)
    assert [s.id for s in plan.order()] == list(expected)
