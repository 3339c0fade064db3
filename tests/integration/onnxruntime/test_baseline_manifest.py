"""Every build writes artifacts/<target>/manifest.json, and `run --baseline` imports the
baseline from it as an input artifact: the comparison travels to a remote worker by
content, with nothing of the client's baseline path (issue 33, defect 4)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.digest import digest_file
from edgebuild.core.manifest import MANIFEST_NAME, read_manifest, verified_files
from edgebuild.errors import ExitCode
from tests.conftest import edgebuild

pytestmark = pytest.mark.onnxruntime
pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")


def run(recipe: Path, out: str, *args: str) -> tuple[int, dict[str, Any], str]:
    done = edgebuild("run", str(recipe), "--out", str(recipe.parent / out), "-q", *args)
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    report_file = recipe.parent / out / "report.json"
    report = json.loads(report_file.read_text()) if report_file.is_file() else {}
    return done.returncode, report, text


def stages(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in report["stages"]}


@pytest.fixture
def baseline(tiny_project: Callable[..., Path]) -> Path:
    recipe = tiny_project()
    code, _, text = run(recipe, "base")
    assert code == ExitCode.OK, text
    return recipe


@pytest.mark.slow
def test_every_build_writes_its_manifest(baseline: Path) -> None:
    out = baseline.parent / "base"
    report = json.loads((out / "report.json").read_text())
    folder = out / "artifacts" / "host-cpu"
    manifest = read_manifest(folder / MANIFEST_NAME)
    compiled = stages(report)["compile@host-cpu"]
    assert (manifest.stage, manifest.stage_key) == ("compile@host-cpu", compiled["key"])
    assert (manifest.backend, manifest.format, manifest.main) == (
        "onnxruntime", "onnx", "model.onnx")
    assert manifest.profile.name == "host-cpu" and manifest.device.kind == "cpu"
    assert manifest.precision == "fp32" and not manifest.builds_on_device
    assert set(manifest.tools) == {"onnx", "onnxruntime"}
    # The files as copied, each with its digest and size; the manifest lists itself not.
    assert verified_files(folder, manifest).keys() == {"model.onnx"}
    assert {p.name for p in folder.iterdir()} == {"model.onnx", MANIFEST_NAME}
    (target,) = report["targets"]
    assert [(g.gate, g.status, g.measured) for g in manifest.gates] == [
        (g["gate"], g["status"], g["measured"]) for g in target["gates"]]
    assert manifest.passed and manifest.size_bytes == target["size_bytes"]


@pytest.mark.slow
def test_the_baseline_is_an_input_artifact_from_its_manifest(baseline: Path) -> None:
    code, report, text = run(baseline, "head", "--baseline",
                             str(baseline.parent / "base" / "report.json"))
    assert code == ExitCode.OK, text
    by_id = stages(report)
    imported = by_id["import-baseline@host-cpu"]
    assert by_id["compare-latency@host-cpu"]["inputs"] == [
        "import-baseline@host-cpu", "compile@host-cpu"]
    # The baseline's content: the same model as this build's (same recipe, same cache).
    assert imported["artifact_digest"] == by_id["compile@host-cpu"]["artifact_digest"]
    assert imported["metadata"]["baseline"]["stage_key"] == by_id["compile@host-cpu"]["key"]
    gates = {g["gate"]: g for g in report["targets"][0]["gates"]}
    assert gates["regression"]["status"] in ("passed", "undecided"), gates["regression"]
    assert gates["regression"]["measured"]["ratio"] > 0


@pytest.mark.slow
def test_the_comparison_runs_remotely_without_the_client_baseline_path(
        baseline: Path, tmp_path: Path) -> None:
    """Defect 4: the compare stage's task carries the baseline's files as its `baseline`
    input, so a worker with none of the client's paths runs it (the baseline's --out
    folder is deleted before the task runs)."""
    from edgebuild.cache.store import Store
    from edgebuild.execute.remote.far_side import run_remote, task_files
    from edgebuild.execute.task import stage_spec
    from edgebuild.plan.planner import build_plan
    from edgebuild.recipe.loader import load_recipe
    from edgebuild.report.baseline import baseline_artifacts

    base = baseline.parent / "base"
    code, report, text = run(baseline, "head", "--baseline", str(base / "report.json"))
    assert code == ExitCode.OK, text
    keys = {sid: s["key"] for sid, s in stages(report).items()}
    plan = build_plan(load_recipe(baseline), baseline_artifacts(base / "report.json"))
    stage = plan.stage("compare-latency@host-cpu")
    store = Store(tmp_path / "cache")  # the run's (tests/conftest.py: isolated_cache)
    inputs = {role: store.lookup(keys[upstream]) for role, upstream in stage.inputs}
    assert all(inputs.values())
    spec = stage_spec(plan, stage, inputs, tmp_path / "unused")  # type: ignore[arg-type]
    assert str(base) not in json.dumps(spec["params"])
    files = task_files(spec, {})
    model = base / "artifacts" / "host-cpu" / "model.onnx"
    assert files["inputs/baseline/model.onnx"][0] == digest_file(model)
    sent = {dest: (digest, path.read_bytes()) for dest, (digest, path) in files.items()}
    shutil.rmtree(base)
    reply = run_remote(spec, sent, [])
    assert reply["result"]["status"] == "ok", reply
    assert reply["result"]["metadata"]["blocks"] >= 1
    assert {"baseline_ms.npy", "candidate_ms.npy"} <= set(reply["files"])


@pytest.mark.slow
def test_a_baseline_from_before_the_manifest_asks_for_a_rebuild(baseline: Path) -> None:
    base = baseline.parent / "base"
    (base / "artifacts" / "host-cpu" / MANIFEST_NAME).unlink()
    code, _, text = run(baseline, "head", "--baseline", str(base / "report.json"))
    assert code == ExitCode.USAGE, text
    assert f"{base}/artifacts/host-cpu/manifest.json: no manifest" in text
    assert "hint: rebuild the baseline with this edgebuild" in text


@pytest.mark.slow
def test_a_baseline_changed_after_its_build_is_refused(baseline: Path) -> None:
    base = baseline.parent / "base"
    with (base / "artifacts" / "host-cpu" / "model.onnx").open("ab") as model:
        model.write(b"\0")
    code, _, text = run(baseline, "head", "--baseline", str(base / "report.json"))
    assert code == ExitCode.USAGE, text
    assert "file model.onnx does not match its recorded size and sha256" in text
