"""How recipe (ONNX, NCHW) tensors map onto a TFLite model's, and the implicit onnx2tf step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgebuild.backends.tflite.options import TfliteOptions
from edgebuild.backends.tflite.tensors import in_order, inverse, layout_perm, match_names
from edgebuild.errors import StageError
from edgebuild.plan.planner import implicit_path
from edgebuild.registry import conversions


def test_nchw_input_maps_to_nhwc() -> None:
    assert layout_perm([1, 3, 224, 224], [1, 224, 224, 3], channels_last=True) == [0, 2, 3, 1]
    assert layout_perm(["batch", 1, 28, 28], [1, 28, 28, 1], channels_last=True) == [0, 2, 3, 1]


def test_same_shape_is_identity_unless_channels_last_says_otherwise() -> None:
    assert layout_perm([1, 1000], [1, 1000], channels_last=True) is None
    assert layout_perm([1, 3, 224, 224], [1, 3, 224, 224], channels_last=False) is None
    # A square tensor is ambiguous by shape alone: the recorded layout decides.
    assert layout_perm([1, 4, 4, 4], [1, 4, 4, 4], channels_last=True) == [0, 2, 3, 1]
    assert layout_perm([1, 4, 4, 4], [1, 4, 4, 4], channels_last=False) is None


def test_unmappable_shape_is_a_stage_error() -> None:
    with pytest.raises(StageError, match="neither the ONNX shape"):
        layout_perm([1, 3, 224, 224], [1, 150528], channels_last=True)


def test_inverse_undoes_the_permutation() -> None:
    assert inverse([0, 2, 3, 1]) == [0, 3, 1, 2]
    assert inverse(None) is None


def test_names_match_by_name_then_by_position() -> None:
    assert match_names(["image"], ["image"]) == {"image": "image"}
    assert match_names(["input.1"], ["input_1"]) == {"input.1": "input_1"}
    with pytest.raises(StageError):
        match_names(["a", "b"], ["a"])


def test_calibrated_precisions_need_a_dataset() -> None:
    with pytest.raises(ValueError, match="calibration_dataset"):
        TfliteOptions.model_validate({"precision": "int8"})
    with pytest.raises(ValueError, match="io_type"):
        TfliteOptions.model_validate({"precision": "float16", "io_type": "uint8"})
    assert TfliteOptions.model_validate(
        {"precision": "int8", "io_type": "uint8", "calibration_dataset": "photos"})


def test_planner_reaches_a_savedmodel_through_onnx2tf() -> None:
    table = conversions()  # export-onnx, and what the installed backends contribute
    assert implicit_path("onnx", ("tf-savedmodel",), table) == ["onnx-to-tf"]
    assert implicit_path("pytorch", ("tf-savedmodel",), table) == ["export-onnx", "onnx-to-tf"]
    assert implicit_path("onnx", ("onnx",), table) == []
    assert implicit_path("tflite", ("onnx",), table) is None


def _graph(nodes: list[Any], inputs: list[Any]) -> Any:
    import onnx
    from onnx import TensorProto, helper

    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return helper.make_model(helper.make_graph(nodes, "g", inputs, [out]),
                             opset_imports=[onnx.helper.make_opsetid("", 17)])


def test_an_input_the_graph_transposes_to_nchw_is_kept_channels_last() -> None:
    from onnx import TensorProto, helper

    from edgebuild.backends.tflite.prepare_onnx import channels_last_inputs

    image = helper.make_tensor_value_info("image", TensorProto.UINT8, [1, 8, 8, 3])
    plain = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    nodes = [helper.make_node("Cast", ["image"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Transpose", ["f"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Add", ["t", "x"], ["y"])]
    assert channels_last_inputs(_graph(nodes, [image, plain])) == ["image"]
    other = [helper.make_node("Cast", ["image"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Transpose", ["f"], ["y"], perm=[0, 2, 3, 1])]
    assert channels_last_inputs(_graph(other, [image])) == []


def test_constant_nodes_become_initializers(tmp_path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from edgebuild.backends.tflite.prepare_onnx import constants_to_initializers

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Constant", [], ["c"],
                              value=numpy_helper.from_array(np.array([0.5, 1.0], np.float32))),
             helper.make_node("Add", ["x", "c"], ["y"])]
    path = tmp_path / "m.onnx"
    onnx.save(_graph(nodes, [x]), str(path))
    constants_to_initializers(path)
    model = onnx.load(str(path))
    assert [n.op_type for n in model.graph.node] == ["Add"]
    assert numpy_helper.to_array(model.graph.initializer[0]).tolist() == [0.5, 1.0]
    assert model.graph.initializer[0].name == "c"


def test_runner_feeds_an_unquantized_integer_input_as_it_is() -> None:
    import numpy as np

    from edgebuild.backends.tflite.runner import recipe_dtype, to_model

    raw = {"perm": None, "dtype": "uint8", "quantization": None}
    quantized = {"perm": None, "dtype": "int8", "quantization": [0.5, 0]}
    image = np.array([[0, 128, 255]], dtype=np.uint8)
    assert recipe_dtype(raw) == "uint8"
    assert to_model(image, raw).dtype == np.uint8
    assert to_model(image, raw).tolist() == [[0, 128, 255]]
    assert recipe_dtype(quantized) == "float32"
    assert to_model(np.array([1.0, -1.0], np.float32), quantized).tolist() == [2, -2]


def test_an_nms_onnx2tf_cannot_convert_is_named_with_a_hint() -> None:
    from onnx import TensorProto, helper

    from edgebuild.backends.tflite.onnx_to_tf import conversion_error

    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 10, 4])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 10])
    nms = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"], name="/nms")
    log = "ERROR: onnx_op_name: /nms\nTypeError: Cannot convert '' to EagerTensor"
    error = conversion_error(_graph([nms], [boxes, scores]), log)
    assert "NonMaxSuppression node '/nms'" in str(error)
    assert "boxes [1, 10, 4]" in error.hint and "NMS in the app" in error.hint


def test_a_size_one_axis_moved_maps_by_that_permutation() -> None:
    """Silero VAD's next state, ONNX [2, 1, 128], comes out of onnx2tf as (1, 2, 128):
    the same data in the same order, mapped back by moving the size-1 axis."""
    import numpy as np

    perm = layout_perm([2, 1, 128], [1, 2, 128], channels_last=True)
    assert perm == [1, 0, 2]
    state = np.arange(256).reshape(2, 1, 128)
    assert np.transpose(state, perm).ravel().tolist() == state.ravel().tolist()
    with pytest.raises(StageError, match="neither the ONNX shape"):  # a real transpose
        layout_perm([2, 3, 128], [3, 2, 128], channels_last=True)


def test_slice_lists_only_the_axes_it_cuts(tmp_path: Path) -> None:
    """onnxslim writes `x[:, :129, :]` as a Slice over all three axes; onnx2tf applied
    such a Slice's bounds to the channels-last tensor's axes (Silero VAD: empty outputs).
    Only the cut axis is left, and ONNX Runtime computes the same before and after."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from edgebuild.backends.tflite.prepare_onnx import drop_full_slice_axes

    big = np.iinfo(np.int64).max
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 258, 4])
    model = _graph([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])], [x])
    model.graph.initializer.extend(
        numpy_helper.from_array(np.array(v, np.int64), n)
        for n, v in (("s", [0, 129, 0]), ("e", [big, big, big]), ("a", [0, 1, 2]),
                     ("t", [1, 1, 1])))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    data = np.random.default_rng(0).standard_normal((1, 258, 4)).astype(np.float32)
    before = ort.InferenceSession(str(path)).run(None, {"x": data})[0]
    drop_full_slice_axes(path)
    rewritten = onnx.load(str(path))
    constants = {i.name: numpy_helper.to_array(i) for i in rewritten.graph.initializer}
    (node,) = rewritten.graph.node
    assert [constants[n].tolist() for n in node.input[1:]] == [[129], [big], [1], [1]]
    after = ort.InferenceSession(str(path)).run(None, {"x": data})[0]
    assert after.shape == (1, 129, 4)
    np.testing.assert_array_equal(before, after)


def test_an_input_without_a_sample_axis_keeps_its_shape() -> None:
    from onnx import TensorProto, helper

    from edgebuild.backends.tflite.prepare_onnx import unbatched_inputs

    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 576]),
              helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, 128]),
              helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 64])]
    model = _graph([helper.make_node("Identity", ["input"], ["y"])], inputs)
    declared = [{"name": "input", "shape": [1, 576]},
                {"name": "state", "shape": [2, 1, 128], "batch_axis": None},
                {"name": "h", "shape": [1, 64], "batch_axis": None}]  # 2-D: never transposed
    assert unbatched_inputs(model, declared) == ["state"]


def test_a_failed_conversion_shows_the_pinned_shapes_and_onnx2tfs_exception(
        tmp_path: Path) -> None:
    """Issue 30: the sequence model's onnx2tf failure showed the source's unpinned
    `['sequence_length', 129, 4]` and not onnx2tf's exception. The message now takes
    the shapes from the graph onnx2tf was given (converted.onnx, pinned) and keeps the
    exception from onnx2tf's output."""
    import onnx
    from onnx import TensorProto, helper

    from edgebuild.backends.tflite.onnx_to_tf import CONVERTED_ONNX, conversion_error, converted_or
    from edgebuild.passes.onnx_shapes import pin_input_shapes

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["sequence_length", 129, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    relu = helper.make_node("Relu", ["x"], ["y"], name="/encoder.0/Relu")
    source = helper.make_model(helper.make_graph([relu], "g", [x], [y]),
                               opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(source, tmp_path / "source.onnx")
    out = tmp_path / "out"
    out.mkdir()
    assert converted_or(out, source) is source  # onnx2tf never started: the source
    pin_input_shapes(tmp_path / "source.onnx", out / CONVERTED_ONNX, {"x": [1, 129, 4]})
    log = ("INFO: onnx_op_name: /encoder.0/Relu\n"
           "ERROR: The trace log is below.\nTraceback (most recent call last):\n"
           "ValueError: Dimensions must be equal, but are 4 and 129")
    error = conversion_error(converted_or(out, source), log)
    assert "node '/encoder.0/Relu'" in str(error)
    assert "x [1, 129, 4]" in error.hint and "sequence_length" not in error.hint
    assert "ValueError: Dimensions must be equal" in error.hint


def test_node_names_tensorflow_refuses_are_made_scope_names(tmp_path: Path) -> None:
    """PaddlePaddle's `Softmax@0` (PP-OCR's direction classifier) failed onnx2tf as a
    TensorFlow scope; PyTorch's `/features/features.0/Conv` is a scope and is kept."""
    import onnx
    from onnx import TensorProto, helper

    from edgebuild.backends.tflite.prepare_onnx import name_nodes_and_infer_shapes

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/features/features.0/Relu"),
             helper.make_node("Softmax", ["a"], ["b"], name="Softmax@0"),
             helper.make_node("Relu", ["b"], ["c"], name="Softmax_0"),  # taken already
             helper.make_node("Relu", ["c"], ["y"])]
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy"]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", value[:1], value[1:])), path)
    name_nodes_and_infer_shapes(path)
    assert [n.name for n in onnx.load(path).graph.node] == [
        "/features/features.0/Relu", "Softmax_0_1", "Softmax_0", "sng_Relu_3"]


def test_numbered_signature_names_keep_their_order_past_ten() -> None:
    """LiteRT-Torch's args_0 … args_11: text order would feed args_10 the third input."""
    names = [f"args_{i}" for i in range(12)]
    shuffled = sorted(names)  # args_0, args_1, args_10, args_11, args_2, …
    assert in_order(shuffled) == names
    recipe = [f"x{i}" for i in range(12)]
    assert match_names(recipe, in_order(shuffled)) == dict(zip(recipe, names, strict=True))
    assert in_order(["b", "a_2", "a_10", "a"]) == ["a", "a_2", "a_10", "b"]
