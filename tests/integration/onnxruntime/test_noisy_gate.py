"""`on_noisy: undecided` through the real CLI: a missed budget under load is undecided,
the policy decides the exit code, and the noisy figure is measured again next run."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TINY_RECIPE, edgebuild

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

# Any machine that just ran a build has a load above 0.001 a core, so a miss is judged
# as noisy; the budget is set from a first run's own figure so that the miss (1.3×) is
# one the load can explain (at least 2×): undecided, not failed. (A budget of a
# nanosecond is missed by more than any load explains: that fails, test_busy_machine.py.)
NOISY = TINY_RECIPE.replace(
    "latency: {budget_ms: 1000}",
    "latency: {budget_ms: 1000, on_noisy: undecided, max_load: 0.001}")


def within_noise(recipe: Path, out: Path) -> None:
    """Run once, then set the budget to the figure / 1.3 (the figure stays cached when it
    was timed quietly; otherwise the next run times it again, near it)."""
    first = edgebuild("run", str(recipe), "--out", str(out), cwd=recipe.parent)
    assert first.returncode == 0, first.stdout + first.stderr
    p50 = latency_gate(out)["measured"]["p50"]
    stages = json.loads((out / "report.json").read_text())["stages"]
    if any(s["metadata"].get("untrusted") for s in stages):
        pytest.skip("other processes took the CPU while timing: that figure is not cached, "
                    "so there is no fixed figure to set a budget from")
    recipe.write_text(recipe.read_text().replace("budget_ms: 1000", f"budget_ms: {p50 / 1.3}"))


def latency_gate(out: Path) -> dict[str, Any]:
    report = json.loads((out / "report.json").read_text())
    gate: dict[str, Any] = next(g for t in report["targets"] for g in t["gates"]
                                if g["gate"] == "latency")
    load = gate["details"]["conditions"]
    if max(load["load_average"][0], load["load_average_after"][0]) == 0:
        pytest.skip("the load average read 0.00: this machine was idle to two decimals")
    return gate


@pytest.mark.slow
def test_missed_budget_under_load_is_undecided_and_measured_again(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = tiny_project(NOISY)
    out = tmp_path / "out"
    within_noise(recipe, out)
    first = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    gate = latency_gate(out)
    assert first.returncode == 0, first.stdout + first.stderr  # policy.undecided: warn
    assert gate["status"] == "undecided" and not gate["counts_as_failure"]
    assert gate["message"].startswith("undecided (machine too noisy: load ")
    # "load 2.3 on 2 cores during …", or with others' share when a parallel worker or
    # another job took over a quarter of the CPU: "… 2 cores, other processes used 38% …"
    assert re.search(r" on \d+ cores(, other processes used \d+% of the CPU)? during "
                     r"measurement\): p50 ", gate["message"]), gate["message"]
    assert "UNDECIDED" in first.stdout
    summary = (out / "summary.md").read_text()
    assert "no gate failed, 1 undecided" in summary and "⚠️ undecided" in summary
    case = next(c for c in ET.parse(out / "junit.xml").getroot().iter("testcase")
                if c.get("name") == "latency")
    assert case.find("skipped") is not None

    # The noisy figure was not kept: the next run times the model again.
    second = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    stages = json.loads((out / "report.json").read_text())["stages"]
    outcomes = {s["id"]: s["outcome"] for s in stages}
    assert outcomes["measure-latency@host-cpu"] == "built"
    assert outcomes["compile@host-cpu"] == "cached"


@pytest.mark.slow
def test_policy_undecided_fail_exits_1_with_a_junit_failure(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    recipe = tiny_project(NOISY + "policy: {undecided: fail}\n")
    out = tmp_path / "out"
    within_noise(recipe, out)
    result = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    gate = latency_gate(out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert gate["status"] == "undecided" and gate["counts_as_failure"]
    assert "policy.undecided: fail" in gate["message"]
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("failures") == "1"
