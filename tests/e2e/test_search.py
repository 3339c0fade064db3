"""A recipe search through the real CLI: Fashion-MNIST as FP32 / FP16 / INT8 / over-pruned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import (
    cached_rerun,
    edgebuild,
    fashion_recipe,
    retimed,
    skip_if_the_machine_was_busy,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist").is_dir(),
                       reason="needs the Debian package dataset-fashion-mnist (scripts/setup.sh)"),
]

RECIPE = fashion_recipe("fashion-mnist-search", test_limit=2000) + """\
targets:
  host-cpu:
    measure: {min_iterations: 100, min_seconds: 0.5, max_busy_share: null}
    gates:
      accuracy: {dataset: test, min_top1: 89.0, max_top1_drop: 1.5}
      latency: {percentile: 90, budget_ms: 20}
      size: {max_mb: 1}
    search:
      max_candidates: 4
      max_minutes: 30
      candidates:
        fp32: {}
        fp16:
          passes: [quantize: {mode: fp16}]
        int8:
          passes: [quantize: {mode: static, calibration: calibration, per_channel: false}]
        pruned-80:                # no fine-tuning: its accuracy collapses, it must lose
          inherit_passes: false
          passes: [prune: {ratio: 0.8}, export-onnx: {opset: 17}, onnx-optimize]
"""


def test_search_chooses_a_passing_candidate_and_caches_the_choice(tmp_path: Path) -> None:
    recipe = tmp_path / "search.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"

    plan = edgebuild("plan", str(recipe), cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "search  host-cpu: 4 candidates" in plan.stdout
    assert "select@host-cpu(4 candidates)" in plan.stdout

    cold = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    if cold.returncode == 1:
        skip_if_the_machine_was_busy(out)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    assert "Traceback" not in cold.stderr
    report = json.loads((out / "report.json").read_text())
    (target,) = report["targets"]
    search = target["search"]
    rows = {row["name"]: row for row in search["candidates"]}
    assert set(rows) == {"fp32", "fp16", "int8", "pruned-80"}

    pruned = rows["pruned-80"]
    assert pruned["state"] == "rejected" and not pruned["chosen"]
    assert "accuracy failed" in pruned["reason"]
    chosen = rows[search["chosen"]]
    assert chosen["chosen"] and chosen["state"] == "chosen"
    assert chosen["gates"] and all(g["status"] == "passed" for g in chosen["gates"])
    for row in rows.values():
        if row["state"] != "chosen":
            assert not row["chosen"]
        if row["state"] in ("chosen", "passed"):
            assert row["ratio"] is not None and row["interleaved_ms"] is not None
    assert any(row["pareto"] for row in rows.values())

    # The target's gates are the chosen candidate's, plus the search verdict.
    gates = {g["gate"]: g for g in target["gates"]}
    assert set(gates) == {"accuracy", "latency", "size", "search"}
    assert all(g["status"] == "passed" for g in gates.values())
    assert gates["accuracy"]["measured"]["top1"] >= 89
    assert target["artifact"] == "artifacts/host-cpu/model.onnx"
    assert (out / "artifacts" / "host-cpu" / "model.onnx").is_file()
    select = next(s for s in report["stages"] if s["id"] == "select@host-cpu")
    assert select["outcome"] == "built"
    assert select["metadata"]["chosen"] == search["chosen"]

    summary = (out / "summary.md").read_text()
    assert "### Search `host-cpu`: chose" in summary
    assert "| ❌ rejected" in summary and "`pruned-80`" in summary
    junit = (out / "junit.xml").read_text()
    assert 'classname="fashion-mnist-search.host-cpu.candidates" name="pruned-80"' in junit
    assert "candidates of host-cpu" in cold.stdout

    busy = retimed(out)
    cached = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    assert cached.returncode == 0, cached.stdout + cached.stderr
    assert cached_rerun(busy) in cached.stdout
    again = json.loads((out / "report.json").read_text())
    assert again["counts"]["built"] == len(busy)
    assert again["targets"][0]["search"]["chosen"] == search["chosen"]

    replan = edgebuild("plan", str(recipe), "--format", "json", cwd=tmp_path)
    assert replan.returncode == 0, replan.stderr
    # Nothing is rebuilt: what is left to run can only be measurements, the figures the
    # last run timed under load (never cached) and the stages that time candidates.
    stages = {s["id"]: s for s in json.loads(replan.stdout)["stages"]}
    to_run = {sid for sid, s in stages.items() if s["state"] == "to-run"}
    busy = retimed(out)
    assert busy <= to_run
    assert all(sid in busy or stages[sid]["measures"] for sid in to_run), \
        sorted(to_run - busy)


def test_search_where_nothing_passes_fails_the_target(tmp_path: Path) -> None:
    text = RECIPE.replace("budget_ms: 20", "budget_ms: 0.0001")
    start = text.index("        fp16:")
    recipe = tmp_path / "search.yaml"
    recipe.write_text(text[:start])  # fp32 only, with an impossible latency budget
    out = tmp_path / "out"
    result = edgebuild("run", str(recipe), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "host-cpu.search: no candidate passed every gate" in result.stdout
    report = json.loads((out / "report.json").read_text())
    (target,) = report["targets"]
    assert target["artifact"] is None
    assert target["search"]["chosen"] is None
    (row,) = target["search"]["candidates"]
    assert row["state"] == "rejected" and "latency failed" in row["reason"]
