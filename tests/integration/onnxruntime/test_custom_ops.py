"""ONNX Runtime runs the custom node with the recipe's Python kernel: compile (ORT's own
graph optimization), the runner the accuracy gate uses, the latency measurement, and the
domain the artifact keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.customops.declared import activated
from edgebuild.errors import StageError
from edgebuild.execute.worker import run_stage
from edgebuild.measure.record import LatencyRecord, read_record
from edgebuild.registry import load_backend
from tests.integration import custom_ops_chain as chain

pytest.importorskip("onnxruntime", reason="the ONNX Runtime backend needs onnxruntime")
pytest.importorskip("onnxruntime_extensions",
                    reason="Python kernels of custom ops need onnxruntime-extensions")
pytestmark = [pytest.mark.onnxruntime, pytest.mark.slow]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[chain.Plan, dict[str, Artifact]]:
    plan = chain.plan()
    return plan, chain.build(plan, "host-cpu", tmp_path_factory.mktemp("host-cpu"))


def declared(plan: chain.Plan) -> dict[str, Any]:
    return {n: op.model_dump(mode="json") for n, op in plan.recipe.recipe.custom_ops.items()}


def test_compiled_model_keeps_the_declared_domain(
        built: tuple[chain.Plan, dict[str, Artifact]]) -> None:
    import onnx

    _, done = built
    saved = onnx.load(str(done["compile@host-cpu"].main))
    # ORT optimized around the node; the artifact keeps the recipe's domain (renamed to
    # ai.onnx.contrib only inside a session).
    assert [(n.domain, n.op_type) for n in saved.graph.node if n.domain] == [
        ("com.example.research", "LocalWindowAttention")]
    # export-onnx checked the node against PyTorch with the same kernel.
    assert done["export-onnx"].metadata["check"]["max_abs_diff"] < 1e-4


def test_runner_matches_pytorch(built: tuple[chain.Plan, dict[str, Artifact]]) -> None:
    plan, done = built
    samples = chain.images()
    expected = chain.torch_outputs(samples[:, 0])
    runner = load_backend("onnxruntime").runner(done["compile@host-cpu"],
                                                plan.recipe.targets["host-cpu"], 1)
    with activated(declared(plan), chain.RECIPE.parent), runner:
        got = np.concatenate([runner.infer({"image": x})["logits"] for x in samples])
    assert np.abs(got - expected).max() < 1e-4


def test_latency_is_measured_with_the_kernel(
        built: tuple[chain.Plan, dict[str, Artifact]], tmp_path: Path) -> None:
    plan, done = built
    target = plan.recipe.targets["host-cpu"].model_dump(mode="json")
    # Short, and without the busy-machine check: this host is shared.
    target["profile"]["measure"].update(max_busy_share=None, min_seconds=0.2,
                                        min_iterations=20, warmup_iterations=2)
    spec = chain.stage_spec(plan, plan.stage("compile@host-cpu"),
                            {"model": done["compile@host-cpu"]}, tmp_path)
    result = run_stage({**spec, "op": "measure-latency", "params": {}, "target": target,
                        "stage_id": "measure-latency@host-cpu"})
    assert result.status == "ok", result
    record = read_record(LatencyRecord, result.metadata, "measure-latency@host-cpu")
    assert record.n is not None and record.n >= 20 and record.p50 is not None and record.p50 > 0


def test_no_kernel_is_a_clear_error(built: tuple[chain.Plan, dict[str, Artifact]]) -> None:
    plan, done = built
    ops = declared(plan)
    ops["LocalWindowAttention"]["kernels"]["onnxruntime"] = None
    runner = load_backend("onnxruntime").runner(done["compile@host-cpu"],
                                                plan.recipe.targets["host-cpu"], 1)
    with activated(ops, chain.RECIPE.parent), pytest.raises(StageError) as info:
        runner.activate()
    assert "com.example.research::LocalWindowAttention" in info.value.message
    assert "kernels.onnxruntime" in info.value.hint
