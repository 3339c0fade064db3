"""The litert-torch backend for real, on the quickstart's build (tests/conftest.py:
quickstart_build, which CI builds once for every reader): EfficientNet-Lite0 from PyTorch
to .tflite with Google's LiteRT-Torch, float32 and int8 (ai-edge-quantizer, four layers kept
float, biases corrected), gated in the same interpreter as the tflite backend's builds; and
a model that does not export, named by its line. Skipped where LiteRT-Torch is not
installed (conftest.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, SessionBuild, edgebuild

SIGN_GATE = REPO / "tests" / "models" / "sign_gate.py"  # data-dependent control flow
TARGETS = ("android-litert-torch", "android-litert-torch-int8")


def report_of(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_float32_and_int8_pass_their_gates_in_litert(quickstart_build: SessionBuild) -> None:
    report = report_of(quickstart_build.out)
    gates = {(t["name"], g["gate"]): g for t in report["targets"] for g in t["gates"]}
    for target in TARGETS:
        accuracy = gates[(target, "accuracy")]
        assert accuracy["status"] == "passed", accuracy["message"]
        assert "ai-edge-litert interpreter" in accuracy["message"]
        assert gates[(target, "size")]["status"] == "passed"
        latency = gates[(target, "latency")]  # timed here: a host figure, or the load said
        if latency["status"] != "passed":
            assert latency["status"] in ("undecided", "unmeasurable"), latency["message"]
            assert re.search(r"other processes used|load \d", latency["message"]), latency
        else:
            assert "a host figure, not the phone's" in latency["message"]
    assert gates[("android-litert-torch", "accuracy")]["measured"]["cosine"] >= 0.9999
    stages = {s["id"]: s for s in report["stages"]}
    # Straight from PyTorch: no stage before these compiles (no ONNX export, no onnx2tf).
    assert all(stages[f"compile@{target}"]["inputs"] == [] for target in TARGETS)


@pytest.mark.slow
def test_int8_keeps_the_float_layers_and_corrects_biases(quickstart_build: SessionBuild) -> None:
    from ai_edge_litert.interpreter import Interpreter

    stages = {s["id"]: s for s in report_of(quickstart_build.out)["stages"]}
    done = stages["compile@android-litert-torch-int8"]["metadata"]
    assert done["calibration_samples"] == 64
    kept = done["quantization"]["kept_float_ops"]
    assert set(kept) == {"_conv_stem", "_blocks.0._depthwise_conv", "_blocks.0._project_conv",
                         "_blocks.1._expand_conv"} and min(kept.values()) >= 1
    assert done["quantization"]["bias_corrected"]["layers"] == 46  # 50 conv/linear - 4 kept
    model = quickstart_build.out / "artifacts" / "android-litert-torch-int8" / "model.tflite"
    interpreter = Interpreter(model_path=str(model))
    dtypes = {t["index"]: t["dtype"] for t in interpreter.get_tensor_details()}
    weights = [dtypes[op["inputs"][1]] for op in interpreter._get_ops_details()
               if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")]
    # The stem, block 0's two convs and block 1's expand: the first four, in float.
    assert [d == np.float32 for d in weights[:5]] == [True, True, True, True, False]
    assert all(d == np.int8 for d in weights[4:])


@pytest.mark.slow
def test_the_tflite_loads_and_computes_what_pytorch_does(quickstart_build: SessionBuild) -> None:
    """The float32 artifact in ai-edge-litert's interpreter, through the tflite backend's
    runner (its recorded io: the input stays NCHW), against eager PyTorch."""
    import torch

    from edgebuild.backends.tflite.runner import TfliteRunner
    from edgebuild.frontend.torch_model import build_torch_model
    from edgebuild.recipe.loader import load_recipe

    artifacts = quickstart_build.out / "artifacts" / "android-litert-torch"
    io = json.loads((artifacts / "manifest.json").read_text())["runner_metadata"]["io"]
    assert io["inputs"][0]["perm"] in (None, [0, 1, 2, 3])  # NCHW kept
    recipe = load_recipe(REPO / "recipes" / "quickstart.yaml").recipe
    model = build_torch_model(recipe.model.model_dump(exclude_none=True), REPO / "recipes")
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    with TfliteRunner(artifacts / "model.tflite", io, threads=1, use_xnnpack=True) as runner:
        got = runner.infer({"image": x})["logits"]
    with torch.no_grad():
        expected = model.eval()(torch.from_numpy(x)).numpy()
    scale = float(np.abs(expected).max())  # relative: XNNPACK sums in another order
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * scale)


@pytest.mark.slow
def test_data_dependent_control_flow_names_the_line(tmp_path: Path) -> None:
    recipe = tmp_path / "sign.yaml"
    recipe.write_text(f"""\
name: sign-gate
model: {{factory: {SIGN_GATE}:build}}
inputs: [{{name: x, shape: [1, 8]}}]
outputs: [y]
targets:
  android-litert-torch:
    gates: {{size: {{max_mb: 1}}}}
""")
    done = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "LiteRT-Torch: torch.export failed at sign_gate.py:" in said
    assert "if bool(y.sum() > 0)" in said
    assert "torch.where or torch.cond" in said


TOKEN_BAG = REPO / "tests" / "models" / "token_bag.py"  # int64 token ids in


@pytest.mark.slow
def test_int8_calibrates_a_model_whose_ids_the_converter_narrowed(tmp_path: Path) -> None:
    """LiteRT-Torch makes int64 token ids int32: the calibration feeds are narrowed as the
    runner's are (all-MiniLM-L6-v2's int8 first failed here, "Got value of type INT64 but
    expected type INT32")."""
    recipe = tmp_path / "tokens.yaml"
    recipe.write_text(f"""\
name: token-bag
model: {{factory: {TOKEN_BAG}:build}}
inputs: [{{name: ids, shape: [1, 8], dtype: int64}}]
outputs: [scores]
datasets:
  tokens: {{kind: callable, function: {TOKEN_BAG}:tokens}}
targets:
  android-litert-torch-int8:
    profile: android-litert-torch
    options: {{precision: int8, calibration_dataset: tokens, calibration_samples: 16,
              latency_on: host, keep_float: [head]}}
    gates: {{accuracy: {{dataset: tokens, task: regression, min_cosine: 0.99}}}}
""")
    done = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    stage = {s["id"]: s for s in report_of(tmp_path / "out")["stages"]}[
        "compile@android-litert-torch-int8"]
    io = stage["metadata"]["io"]["inputs"][0]
    assert (io["dtype"], io["recipe_dtype"]) == ("int32", "int64")
    # The head computes the model's output: found by the output's name, kept float.
    assert stage["metadata"]["quantization"]["kept_float_ops"] == {"head": 1}
