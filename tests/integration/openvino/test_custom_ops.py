"""OpenVINO reads the custom node through the recipe's conversion onto its own ops: the
IR holds only built-in ops, so it runs (accuracy, latency, another machine) without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.errors import StageError
from edgebuild.registry import load_backend
from tests.integration import custom_ops_chain as chain

pytest.importorskip("openvino", reason="the OpenVINO backend needs openvino")
pytestmark = [pytest.mark.openvino, pytest.mark.slow]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[chain.Plan, dict[str, Artifact]]:
    plan = chain.plan()
    return plan, chain.build(plan, "intel-cpu", tmp_path_factory.mktemp("intel-cpu"))


def test_ir_has_only_built_in_ops_and_matches_pytorch(
        built: tuple[chain.Plan, dict[str, Artifact]]) -> None:
    plan, done = built
    compiled = done["compile@intel-cpu"]
    ops = compiled.metadata["graph"]["ops"]
    assert "LocalWindowAttention" not in ops
    assert {"Softmax", "ScaledDotProductAttention"} & set(ops)  # what the conversion built
    samples = chain.images()
    expected = chain.torch_outputs(samples[:, 0])
    # No custom ops activated: the IR needs neither the extension nor the recipe's files.
    with load_backend("openvino").runner(compiled, plan.recipe.targets["intel-cpu"], 1) as r:
        got = np.concatenate([r.infer({"image": x})["logits"] for x in samples])
    assert np.abs(got - expected).max() < 1e-4


def test_no_conversion_is_a_clear_stage_error(
        built: tuple[chain.Plan, dict[str, Artifact]], tmp_path: Path) -> None:
    plan, done = built
    ops: dict[str, Any] = {n: op.model_dump(mode="json")
                           for n, op in plan.recipe.recipe.custom_ops.items()}
    ops["LocalWindowAttention"]["kernels"]["openvino"] = None
    with pytest.raises(StageError) as info:  # the worker reports it as the stage's error
        chain.run(plan, "compile@intel-cpu", {"model": done["onnx-optimize"]}, tmp_path,
                  {"custom_ops": ops})
    assert "custom op 'com.example.research::LocalWindowAttention'" in info.value.message
    assert "OpenVINO has no conversion" in info.value.message
    assert "kernels.openvino: {conversion:" in info.value.hint
