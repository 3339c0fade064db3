"""Inputs as models really have them (issue 30): rank-0 inputs, inputs without a sample
axis, declared values, and the declared inputs checked against the ONNX file at
validate time.

The model is the real Silero VAD (`silero_vad.onnx` from the PyPI package silero-vad,
installed --no-deps by scripts/setup.sh): `input` [?, ?] float32, `state` [2, ?, 128]
float32, `sr` a rank-0 int64 that selects a branch of an `If`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from edgebuild.cli import main
from edgebuild.core.onnx_io import OnnxReadError, read_signature
from edgebuild.data.loaders import Samples, as_declared, check_matches_inputs
from edgebuild.errors import DataError, RecipeError
from edgebuild.passes.torch_model import sample_inputs
from edgebuild.recipe.inputs import TensorSpec
from edgebuild.recipe.loader import load_recipe

needs_silero = pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                                  reason="silero-vad is not installed (scripts/setup.sh "
                                  "installs it --no-deps)")

RECIPE = """\
name: vad
model:
  onnx: {package: silero_vad, path: data/silero_vad.onnx}
inputs:
  - {name: input, shape: [1, 576], dtype: float32}
  - {name: state, shape: [2, 1, 128], dtype: float32, batch_axis: null, value: 0}
  - SR
outputs: [output, stateN]
targets:
  host-cpu:
    gates: {latency: {budget_ms: 5}}
"""
SR = "{name: sr, shape: [], dtype: int64, value: 16000}"


def silero_file() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "silero_vad.onnx"


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "vad.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    return [str(p) for p in caught.value.problems]


def declared(*specs: dict[str, object]) -> list[dict[str, object]]:
    return [TensorSpec.model_validate(s).declaration() for s in specs]


STATE = {"name": "state", "shape": [2, 1, 128], "batch_axis": None, "value": 0}
SR_SPEC = {"name": "sr", "shape": [], "dtype": "int64", "value": 16000}
AUDIO = {"name": "input", "shape": [1, 576]}


# --- the schema ------------------------------------------------------------------------

def test_a_scalar_input_can_be_declared_and_has_no_sample_axis() -> None:
    spec = TensorSpec.model_validate(SR_SPEC)
    assert spec.shape == [] and spec.batch_axis is None and spec.value == 16000
    with pytest.raises(ValueError, match="has no axis 0 to be a batch axis"):
        TensorSpec.model_validate({**SR_SPEC, "batch_axis": 0})


def test_an_integer_input_takes_only_whole_values() -> None:
    with pytest.raises(ValueError, match="not a whole number"):
        TensorSpec.model_validate({**SR_SPEC, "value": 16000.5})


def test_a_recipe_without_the_new_keys_is_declared_as_before() -> None:
    """Stage keys hash the declarations: untouched recipes keep their cache."""
    spec = {"name": "image", "shape": [1, 3, 8, 8], "dynamic_axes": {0: "batch"}}
    assert TensorSpec.model_validate(spec).declaration() == {
        "name": "image", "shape": [1, 3, 8, 8], "dtype": "float32",
        "dynamic_axes": {"0": "batch"}}


# --- generated inputs (latency, export checks, calibration without data) ---------------

def test_latency_inputs_use_the_declared_values() -> None:
    """Drawn from 0..9, `sr` took the model's 8 kHz branch, which fails on 576 samples."""
    (feeds,) = sample_inputs(declared(AUDIO, STATE, SR_SPEC), seed=0, count=1)
    assert feeds["sr"].shape == () and feeds["sr"].dtype == np.int64
    assert int(feeds["sr"]) == 16000
    assert feeds["state"].shape == (2, 1, 128) and not feeds["state"].any()
    assert feeds["input"].shape == (1, 576)


def test_value_range_bounds_random_integers() -> None:
    tensors = declared({"name": "ids", "shape": [1, 64], "dtype": "int64",
                        "value_range": [100, 102]})
    (feeds,) = sample_inputs(tensors, seed=0, count=1)
    assert set(np.unique(feeds["ids"])) <= {100, 101, 102}


# --- datasets ----------------------------------------------------------------------------

def speech(count: int = 3) -> Samples:
    return Samples({"input": np.zeros((count, 576), np.float32),
                    "state": np.ones((count, 2, 1, 128), np.float32)}, None,
                   [f"#{i}" for i in range(count)])


def test_a_state_without_a_sample_axis_is_fed_as_it_is() -> None:
    tensors = declared(AUDIO, STATE, SR_SPEC)
    check_matches_inputs(speech(), tensors, "speech")
    feed = as_declared(speech(), tensors).feed(1)
    assert list(feed) == ["input", "state", "sr"]  # the declared order
    assert feed["input"].shape == (1, 576)
    assert feed["state"].shape == (2, 1, 128) and feed["state"].all()  # the dataset's
    assert isinstance(feed["sr"], np.ndarray) and feed["sr"].shape == ()
    assert int(feed["sr"]) == 16000  # the declared value: the dataset leaves it out


def test_a_state_read_as_batched_says_how_to_declare_it() -> None:
    """Before: "check the dataset's preprocessing (resize, crop, layout)"."""
    tensors = declared(AUDIO, {**STATE, "batch_axis": 0}, SR_SPEC)
    with pytest.raises(DataError) as caught:
        check_matches_inputs(speech(), tensors, "speech")
    assert "gives input 'state' samples of shape [1, 2, 1, 128], the model declares " \
           "[2, 1, 128]" in caught.value.message
    assert "`batch_axis: null`" in caught.value.hint
    assert "preprocessing" not in caught.value.hint


def test_an_input_no_dataset_gives_and_no_value_declares_is_named() -> None:
    tensors = declared(AUDIO, {**STATE, "value": None}, SR_SPEC)
    with pytest.raises(DataError, match="gives no input 'state'") as caught:
        check_matches_inputs(Samples({"input": np.zeros((2, 576), np.float32)}, None,
                                     ["a", "b"]), tensors, "speech")
    assert "value:" in caught.value.hint


# --- the ONNX file's own inputs, at validate time -----------------------------------------

@needs_silero
def test_silero_vad_recipe_validates(tmp_path: Path) -> None:
    path = tmp_path / "vad.yaml"
    path.write_text(RECIPE.replace("SR", SR))
    assert [t.name for t in load_recipe(path).recipe.inputs] == ["input", "state", "sr"]


@needs_silero
def test_a_scalar_declared_as_a_vector_is_refused_at_its_line(tmp_path: Path) -> None:
    """Before: valid, then `input 'sr' is fixed at [] in this artifact and OrtRunner
    cannot resize it to [1]` at the latency stage, with a hint about `shapes:`."""
    (problem,) = problems(tmp_path, RECIPE.replace(
        "SR", "{name: sr, shape: [1], dtype: int64, value: 16000}"))
    assert "vad.yaml:7:" in problem and "inputs.2.shape" in problem
    assert "silero_vad.onnx declares it as sr int64 []" in problem
    assert "it is a scalar: write `shape: []`" in problem


@needs_silero
def test_wrong_dtype_and_fixed_dimension_are_refused(tmp_path: Path) -> None:
    text = RECIPE.replace("SR", SR.replace("int64", "int32")).replace("[2, 1, 128]",
                                                                       "[2, 1, 64]")
    dtype, dim = sorted(problems(tmp_path, text), key=lambda p: "inputs.2.dtype" not in p)
    assert "inputs.2.dtype" in dtype and "write `dtype: int64`" in dtype
    assert "inputs.1.shape" in dim and "axis 2 is 64" in dim and "fixed at 128" in dim
    assert "[2, 1, 128]" in dim


@needs_silero
def test_an_unknown_input_names_the_files_inputs(tmp_path: Path) -> None:
    text = RECIPE.replace("SR", SR.replace("name: sr", "name: sample_rate"))
    unknown, left_out = sorted(problems(tmp_path, text), key=lambda p: "no input" not in p)
    assert "silero_vad.onnx has no input 'sample_rate'" in unknown
    assert "input float32 [?, ?]; state float32 [2, ?, 128]; sr int64 []" in unknown
    assert "has input 'sr' (int64 [])" in left_out and "{name: sr, shape: [], dtype: " \
        "int64}" in left_out


@needs_silero
def test_validate_exits_2_on_a_contradicting_recipe(tmp_path: Path) -> None:
    path = tmp_path / "vad.yaml"
    path.write_text(RECIPE.replace("SR", SR.replace("shape: []", "shape: [1]")))
    assert main(["validate", str(path)]) == 2


@needs_silero
def test_the_reader_agrees_with_onnx() -> None:
    import onnx

    model = onnx.load(str(silero_file()), load_external_data=False)
    signature = read_signature(silero_file())
    weights = {i.name for i in model.graph.initializer}
    assert [t.name for t in signature.inputs] == [
        i.name for i in model.graph.input if i.name not in weights]
    assert [t.name for t in signature.outputs] == [o.name for o in model.graph.output]
    assert [t.describe() for t in signature.inputs] == [
        "input float32 [?, ?]", "state float32 [2, ?, 128]", "sr int64 []"]


def test_the_reader_refuses_a_truncated_file(tmp_path: Path) -> None:
    from tests.conftest import make_tiny_onnx

    data = make_tiny_onnx(tmp_path / "tiny.onnx").read_bytes()
    assert [t.describe() for t in read_signature(tmp_path / "tiny.onnx").inputs] == [
        "x float32 [1, 4]"]  # the weight W is an initializer, not an input
    for cut in (len(data) // 2, len(data) - 3, 1):
        (tmp_path / "cut.onnx").write_bytes(data[:cut])
        with pytest.raises(OnnxReadError):
            read_signature(tmp_path / "cut.onnx")
