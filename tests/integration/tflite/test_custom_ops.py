"""TFLite gets the custom op decomposed at export (onnx2tf has no custom-op hook): the
decomposed build matches PyTorch, and a custom node reaching onnx2tf is refused clearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgebuild.errors import StageError
from edgebuild.registry import load_backend
from tests.integration import custom_ops_chain as chain

# Skipped by conftest.py when tensorflow, ai-edge-litert or onnx2tf is missing (found, not
# imported: onnx2tf raises the recursion limit to INT_MAX for the whole test process).
pytestmark = [pytest.mark.tflite, pytest.mark.slow]


def test_decomposed_build_matches_pytorch(tmp_path: Path) -> None:
    plan = chain.plan()
    done = chain.build(plan, "android", tmp_path)
    optimized = done["onnx-optimize#2"].metadata["after"]["ops"]
    assert "LocalWindowAttention" not in optimized and "Softmax" in optimized
    samples = chain.images()
    expected = chain.torch_outputs(samples[:, 0])
    with load_backend("tflite").runner(done["compile@android"], plan.recipe.targets["android"],
                                       1) as runner:
        got = np.concatenate([runner.infer({"image": x})["logits"] for x in samples])
    assert np.abs(got - expected).max() < 1e-4


def test_a_custom_node_reaching_onnx2tf_is_refused(tmp_path: Path) -> None:
    from edgebuild.backends.tflite.onnx_to_tf import check_convertible

    plan = chain.plan()
    export = chain.run(plan, "export-onnx", {}, tmp_path)  # the custom-node export
    assert export.status == "ok", export
    import onnx

    model = onnx.load(str(tmp_path / "export-onnx" / export.main or ""))
    with pytest.raises(StageError) as info:
        check_convertible(model)
    assert "custom op 'com.example.research::LocalWindowAttention'" in info.value.message
    assert "kernels.tflite: decompose" in info.value.hint
