"""`inference_precision` on a real model through real OpenVINO: the hint reaches the compiled
model and is read back, it is part of the stage key, the report labels what really ran
(honestly, on a CPU without native bf16/f16 too), and a search can pick it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild import api
from edgebuild.backends.openvino.options import OpenVinoOptions, runtime_config
from edgebuild.core.artifact import Artifact
from edgebuild.core.target import Target
from edgebuild.registry import load_backend
from tests.conftest import REPO

ov = pytest.importorskip("openvino",
                         reason="the OpenVINO backend needs openvino (extra: openvino)")
pytestmark = pytest.mark.openvino

FASHION = Path("/usr/share/datasets/fashion-mnist")
NORMALIZE = "{scale: 0.00392156862745098, mean: [0.2860], std: [0.3530]}"

RECIPE = f"""\
name: fashion-precision
model:
  factory: {REPO}/recipes/models/fashion_mnist_cnn.py:build
  weights: {REPO}/recipes/models/fashion_mnist_cnn.pt
inputs: [{{name: image, shape: [1, 1, 28, 28], dynamic_axes: {{0: batch}}}}]
outputs: [logits]
datasets:
  test: {{kind: idx, images: {FASHION}/t10k-images-idx3-ubyte.gz, limit: 200,
         labels: {FASHION}/t10k-labels-idx1-ubyte.gz, preprocess: {NORMALIZE}}}
passes: [export-onnx, onnx-optimize]
targets:
  f32:
    profile: intel-cpu
    gates: {{accuracy: {{dataset: test, min_top1_agreement: 99}}}}
  bf16:
    profile: intel-cpu
    options: {{inference_precision: bf16}}
    gates: {{accuracy: {{dataset: test, min_top1_agreement: 99}}}}
  f16:
    profile: intel-cpu
    options: {{inference_precision: f16}}
    gates: {{accuracy: {{dataset: test, min_top1_agreement: 99}}}}
  cpu-default:
    profile: intel-cpu
    options: {{inference_precision: default}}
    gates: {{accuracy: {{dataset: test, min_top1_agreement: 99}}}}
  searched:
    profile: intel-cpu
    measure: {{warmup_iterations: 2, min_iterations: 20, min_seconds: 0, max_busy_share: null}}
    gates: {{accuracy: {{dataset: test, min_top1_agreement: 99}}}}
    search:
      candidates:
        hint:
          grid: {{options.inference_precision: [f32, bf16]}}
"""


@cache
def cpu_capabilities() -> list[str]:
    """OPTIMIZATION_CAPABILITIES as the label lists them (EXPORT_IMPORT is a feature)."""
    return [str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
            if str(c) != "EXPORT_IMPORT"]


@cache
def cpu_default() -> str:
    """The precision the CPU plugin runs with no hint: bf16 on a CPU with AVX-512 BF16 or
    AMX, f32 on an AVX2-only one (OpenVINO's own reading, not a guess from the CPU)."""
    return str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name())


def native(precision: str) -> bool:
    return {"bf16": "BF16", "f16": "FP16"}[precision] in cpu_capabilities()


def runs_as(requested: str) -> str:
    """What the plugin runs a hint in on this CPU: the hint where the CPU computes it
    natively; else the plugin ignores the hint and keeps its default (f16 runs as f32 on an
    AVX2-only CPU, as bf16 on an AVX-512 BF16 EPYC; bf16 as f32 on an AVX2-only CPU)."""
    if requested == "default":
        return cpu_default()
    return requested if requested == "f32" or native(requested) else cpu_default()


def layers(counts: dict[str, int]) -> str:
    return ", ".join(f"{p} {n}" for p, n in sorted(counts.items()))


def test_runtime_config_passes_the_hint_and_default_passes_none() -> None:
    for value in ("f32", "bf16", "f16"):
        config = runtime_config(OpenVinoOptions(inference_precision=value), threads=2)
        assert config["INFERENCE_PRECISION_HINT"] == value
    assert "INFERENCE_PRECISION_HINT" not in runtime_config(
        OpenVinoOptions(inference_precision="default"), threads=2)
    assert OpenVinoOptions().inference_precision.value == "f32"  # explicit unless asked


@pytest.mark.slow
@pytest.mark.skipif(not FASHION.is_dir(),
                    reason="needs the Debian package dataset-fashion-mnist (scripts/setup.sh)")
def test_precisions_are_read_back_keyed_labelled_and_searchable(tmp_path: Path) -> None:
    recipe = tmp_path / "precision.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    report = api.run(recipe, api.RunOptions(out=out))
    assert report.exit_code == 0, [g.message for g in report.gates]
    stages = {s.id: s for s in report.stages}
    targets = {t.name: t for t in report.targets}

    # The hint is in the stage key: four targets, four compile keys over one ONNX file.
    compiles = {n: stages[f"compile@{n}"] for n in ("f32", "bf16", "f16", "cpu-default")}
    assert len({s.key for s in compiles.values()}) == 4
    assert len({s.inputs[0] for s in compiles.values()}) == 1

    # Read back from the compiled model: what ran, and a label that says so.
    compiled = {n: s.metadata["precision"] for n, s in compiles.items()}
    for name, facts in compiled.items():
        assert facts["checked_on_this_host"] is True
        assert facts["requested_inference_precision"] == (
            "default" if name == "cpu-default" else name)
        assert sum(facts["runtime_precisions"].values()) > 5  # the CNN's executed layers
        assert targets[name].precision == facts["label"]
    assert compiled["f32"]["label"] == "f32"
    assert compiled["f32"]["effective_inference_precision"] == "f32"
    assert set(compiled["f32"]["runtime_precisions"]) == {"f32"}
    for name in ("bf16", "f16"):
        facts = compiled[name]
        ran = runs_as(name)
        assert facts["effective_inference_precision"] == ran
        assert ran in facts["runtime_precisions"]  # the layers say so too
        if ran == "f32":  # the f32 kernels: no layer in a narrower float
            assert set(facts["runtime_precisions"]) == {"f32"}
        if native(name):
            assert facts["label"].startswith(name) and facts["honoured"]
        else:  # the plugin kept its default (f32 on AVX2, bf16 on AVX-512 BF16): said so
            assert facts["label"] == (
                f"{name} requested; this CPU has no native {name} (OpenVINO CPU "
                f"capabilities: {', '.join(cpu_capabilities())}): ran as {ran} "
                f"(layers: {layers(facts['runtime_precisions'])})")
            assert not facts["honoured"]
    default = compiled["cpu-default"]
    assert default["effective_inference_precision"] == cpu_default()
    assert default["label"] == ("OpenVINO's default (no precision hint): ran as "
                                f"{cpu_default()} on this CPU (layers: "
                                f"{layers(default['runtime_precisions'])})")
    assert default["honoured"]

    # Each measurement carries the runner's own reading when the request was not honoured
    # (or left to OpenVINO); an honoured f32 says nothing extra.
    where = {g.target: str(g.details.get("where", "")) for g in report.gates
             if g.gate == "accuracy"}
    assert "precision" not in where["f32"]
    assert f"precision {compiled['cpu-default']['label']}" in where["cpu-default"]
    assert where["cpu-default"].startswith("precision ")  # this host: nothing before it
    for name in ("bf16", "f16"):
        if native(name):  # honoured: nothing to add, as for f32
            assert "precision" not in where[name]
        else:
            assert f"precision {compiled[name]['label']}" in where[name]

    # The search builds both hints as candidates and picks one; each row is labelled.
    search = targets["searched"].search
    assert search is not None and search.chosen in ("hint-f32", "hint-bf16")
    rows = {row.name: row for row in search.candidates}
    assert set(rows) == {"hint-f32", "hint-bf16"}
    assert all(row.state in ("chosen", "passed") for row in rows.values())
    assert rows["hint-f32"].precision == "f32"
    assert rows["hint-bf16"].precision == compiled["bf16"]["label"]
    assert stages["compile@searched[hint-f32]"].key != \
        stages["compile@searched[hint-bf16]"].key
    assert targets["searched"].precision == rows[search.chosen].precision
    if runs_as("bf16") == "f32":  # the same kernels: a twin of f32, never a winner by noise
        assert search.chosen == "hint-f32"
        assert rows["hint-bf16"].reason == ("builds and runs exactly like 'hint-f32', "
                                            "which stands for it")
    else:  # bf16 kernels here: a rival of f32, timed against it
        assert rows["hint-bf16"].reason != ("builds and runs exactly like 'hint-f32', "
                                            "which stands for it")
    assert stages["compile@searched[hint-bf16]"].metadata["effective_options"] == {
        "inference_precision": runs_as("bf16")}

    # The rendered reports show it.
    summary = (out / "summary.md").read_text()
    assert "Precision (as run on the build host): `f32` f32; `bf16` bf16" in summary
    assert "runs f32 |" in summary  # the search table's "adds" cell
    html = (out / "report.html").read_text()
    assert "<th>precision</th>" in html
    assert json.loads((out / "report.json").read_text())["targets"][1]["precision"] == \
        compiled["bf16"]["label"]


@pytest.mark.skipif(not FASHION.is_dir(),
                    reason="needs the Debian package dataset-fashion-mnist (scripts/setup.sh)")
def test_bf16_and_f16_run_close_to_f32_and_the_runner_says_what_ran(tmp_path: Path) -> None:
    """Outside the pipeline: the runner of each hint, on the Fashion-MNIST CNN and 32 test
    images, completes, agrees with f32 within the precision's tolerance, and labels
    itself; with no native support the plugin runs its default (f32 on an AVX2-only CPU,
    bf16 on one with AVX-512 BF16)."""
    import gzip
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("fashion_cnn",
                                                  REPO / "recipes/models/fashion_mnist_cnn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.build()
    net.load_state_dict(torch.load(REPO / "recipes/models/fashion_mnist_cnn.pt",
                                   weights_only=True))
    onnx_path = tmp_path / "net.onnx"
    torch.onnx.export(net.eval(), torch.zeros(1, 1, 28, 28), str(onnx_path), dynamo=False,
                      opset_version=17, input_names=["x"], output_names=["y"])
    xml = tmp_path / "net.xml"
    ov.save_model(ov.Core().read_model(str(onnx_path)), str(xml), compress_to_fp16=False)
    with gzip.open(FASHION / "t10k-images-idx3-ubyte.gz") as f:
        pixels = np.frombuffer(f.read(), np.uint8, offset=16)[:32 * 784]
    images = (pixels.reshape(32, 1, 1, 28, 28).astype(np.float32) / 255 - 0.2860) / 0.3530
    backend = load_backend("openvino")
    artifact = Artifact("test", "openvino-ir", tmp_path, {"net.xml": "", "net.bin": ""},
                        {"net.xml": 0, "net.bin": 0}, {"main": "net.xml"})
    outputs: dict[str, Any] = {}
    for hint in ("f32", "bf16", "f16"):
        target = Target.model_validate({"name": "intel-cpu", "profile": {
            "name": "intel-cpu", "backend": "openvino", "description": "",
            "device": {"kind": "cpu", "arch": "x86_64", "name": "test"},
            "options": {"inference_precision": hint}}})
        with backend.runner(artifact, target, threads=1) as runner:
            outputs[hint] = np.concatenate([runner.infer({"x": x})["y"] for x in images])
            if hint == "f32" or native(hint):
                assert runner.fallback is None
                assert runner.precision.startswith(hint)
            else:
                assert runner.fallback == f"precision {runner.precision}"
                assert runner.precision.startswith(f"{hint} requested; this CPU has no "
                                                   f"native {hint}")
                assert f"ran as {runs_as(hint)} (layers: " in runner.precision
    scale = float(np.abs(outputs["f32"]).max())
    for hint in ("bf16", "f16"):
        # Ran as f32: the same f32 kernels (a tolerance, not bit equality: no test
        # depends on summation order). Ran narrower: bf16 keeps ~3 significant digits,
        # f16 more.
        tolerance = 1e-5 if runs_as(hint) == "f32" else 5e-2
        np.testing.assert_allclose(outputs[hint], outputs["f32"], rtol=0,
                                   atol=tolerance * scale)
        assert (outputs[hint].argmax(1) == outputs["f32"].argmax(1)).mean() >= 0.9
