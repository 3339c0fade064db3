"""The Triton backend without a server: the repository it writes from a real ONNX file,
what it refuses, and "not measurable here" when the server's environment is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from edgebuild.backends.triton import repository
from edgebuild.backends.triton.options import TritonOptions
from edgebuild.data import pixels
from edgebuild.errors import StageError
from tests.conftest import make_tiny_onnx

NORMALIZE = {"scale": 0.5, "mean": [0.25], "std": [2.0], "layout": "NCHW"}


def _batched_onnx(path: Path) -> Path:
    """A 1-input image model with a symbolic batch axis: [N, 1, 4, 4] -> [N, 3]."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Flatten", ["image"], ["flat"]),
         helper.make_node("MatMul", ["flat", "W"], ["logits"])], "batched",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(np.ones((16, 3), np.float32), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_batched_model_with_its_ensemble(tmp_path: Path) -> None:
    options = TritonOptions.model_validate({
        "preprocess": NORMALIZE, "postprocess": "classification", "top_k": 2,
        "instance_count": 2, "preferred_batch_sizes": [4], "max_queue_delay_microseconds": 100})
    info = repository.write(_batched_onnx(tmp_path / "m.onnx"), tmp_path / "repo",
                            [{"name": "image", "dynamic_axes": {0: "batch"}}], options)
    assert info["max_batch_size"] == 8
    assert info["ensemble"]["steps"] == ["preprocess", "model", "postprocess"]
    model = (tmp_path / "repo" / "model" / "config.pbtxt").read_text()
    assert 'backend: "onnxruntime"' in model and "max_batch_size: 8" in model
    assert 'name: "image" data_type: TYPE_FP32 dims: [ 1, 4, 4 ]' in model
    assert 'name: "logits" data_type: TYPE_FP32 dims: [ 3 ]' in model
    assert "count: 2 kind: KIND_CPU" in model
    assert "preferred_batch_size: [ 4 ]" in model and "max_queue_delay_microseconds: 100" in model
    pre = (tmp_path / "repo" / "preprocess" / "config.pbtxt").read_text()
    assert 'name: "raw" data_type: TYPE_UINT8 dims: [ 4, 4, 1 ]' in pre  # H, W, C
    source = (tmp_path / "repo" / "preprocess" / "1" / "model.py").read_text()
    assert '"scale": 0.5' in source and '"mean": [0.25]' in source
    assert '"layout": "NCHW"' in source and '"resize": null' in source
    compile(source, "model.py", "exec")
    assert (tmp_path / "repo" / "preprocess" / "1" / "pixels.py").read_bytes() == \
        Path(pixels.__file__).read_bytes()  # the loader's own code, served
    assert info["perf_shapes"] == []  # fixed sizes: nothing to tell perf_analyzer
    assert not info["perf_zeros"]  # random pixels are pixels
    compile((tmp_path / "repo" / "postprocess" / "1" / "model.py").read_text(), "m", "exec")
    ensemble = (tmp_path / "repo" / "ensemble" / "config.pbtxt").read_text()
    assert 'platform: "ensemble"' in ensemble
    assert 'name: "classes" data_type: TYPE_INT64 dims: [ 2 ]' in ensemble
    assert (tmp_path / "repo" / "ensemble" / "1").is_dir()
    assert (tmp_path / "repo" / "model" / "1" / "model.onnx").is_file()


def test_a_fixed_batch_axis_is_served_as_declared_or_refused(tmp_path: Path) -> None:
    onnx_path = make_tiny_onnx(tmp_path / "tiny.onnx")  # x [1, 4] -> y [1, 3]
    info = repository.write(onnx_path, tmp_path / "a", [{"name": "x", "shape": [1, 4]}],
                            TritonOptions())
    assert info["max_batch_size"] == 0 and info["ensemble"] is None
    config = (tmp_path / "a" / "model" / "config.pbtxt").read_text()
    assert "max_batch_size: 0" in config and "dims: [ 1, 4 ]" in config
    assert "dynamic_batching" not in config  # Triton refuses it without batching
    with pytest.raises(StageError, match="axis 0 is fixed"):
        repository.write(onnx_path, tmp_path / "b", [{"name": "x", "shape": [1, 4]}],
                         TritonOptions(max_batch_size=4))


def test_options_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValidationError, match="needs `preprocess`"):
        TritonOptions.model_validate({"postprocess": "classification"})
    with pytest.raises(ValidationError, match="preferred_batch_sizes"):
        TritonOptions.model_validate({"max_batch_size": 4, "preferred_batch_sizes": [8]})
    with pytest.raises(ValidationError):
        TritonOptions.model_validate({"instance_cont": 2})


def test_without_the_server_env_the_target_is_not_measurable_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgebuild.backends.triton.backend import TritonBackend
    from edgebuild.core.target import Target
    from edgebuild.recipe.profiles import load_profiles, profile_dirs

    monkeypatch.setenv("EDGEBUILD_TRITON_DIR", str(tmp_path / "none"))
    root = Path(__file__).parents[2]
    profile = load_profiles(profile_dirs(root / "recipe.yaml"))["triton-cpu"].profile
    target = Target(name="t", profile=profile)
    for purpose in ("accuracy", "latency"):
        reason = TritonBackend().unmeasurable_reason(target, purpose)
        assert reason.startswith("not measurable here: the Triton server environment")
        assert "python -m edgebuild.backends.triton.env" in reason
        assert TritonBackend().probe(target, purpose) == reason


def test_an_ensemble_that_resizes_takes_photos_of_any_size(tmp_path: Path) -> None:
    """With resize/crop in `preprocess:` the ensemble's input has no fixed height or
    width; perf_analyzer is told the size it sends (`perf_image`)."""
    options = TritonOptions.model_validate({
        "preprocess": {"resize": 6, "center_crop": 4, "mean": [127], "std": [128],
                       "color": "gray"},
        "perf_image": [48, 64]})
    info = repository.write(_batched_onnx(tmp_path / "m.onnx"), tmp_path / "repo",
                            [{"name": "image", "dynamic_axes": {0: "batch"}}], options)
    pre = (tmp_path / "repo" / "preprocess" / "config.pbtxt").read_text()
    assert 'name: "raw" data_type: TYPE_UINT8 dims: [ -1, -1, 1 ]' in pre
    assert 'name: "image" data_type: TYPE_FP32 dims: [ 1, 4, 4 ]' in pre
    assert info["perf_shapes"] == ["raw:48,64,1"]
    assert info["ensemble"]["steps"] == ["preprocess", "model"]


@pytest.mark.parametrize(("axis0", "shape"), [(1, "x:1,16"), ("batch", "x:16")])
def test_a_dynamic_sequence_is_timed_at_the_recipes_shape(tmp_path: Path, axis0: Any,
                                                         shape: str) -> None:
    """perf_analyzer refuses an input with a -1 dimension unless told its shape (found on
    all-MiniLM-L6-v2: 'input attention_mask contains dynamic shape'): the recipe's."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "seq",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [axis0, "sequence"])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [axis0, "sequence"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    axes = {1: "sequence"} if axis0 == 1 else {0: "batch", 1: "sequence"}
    info = repository.write(tmp_path / "m.onnx", tmp_path / "repo",
                            [{"name": "x", "shape": [1, 16], "dynamic_axes": axes}],
                            TritonOptions())
    assert info["perf_shapes"] == [shape]
    assert info["perf_zeros"]  # random int64 ids would index out of an embedding
