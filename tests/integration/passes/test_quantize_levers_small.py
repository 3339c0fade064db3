"""The calibration levers on small models, where each raised (issue 40, item 5).

- `method: percentile` / `entropy`: ONNX Runtime's histogram collector took its bin
  width from the first calibration sample, which edgebuild feeds one at a time; a
  near-black first image then asked for ~10¹² bins (MemoryError: 36.3 GiB on a 2 MB
  model in the issue) or "Too many bins for data range" (quant/engines/ort_histograms.py).
- `reduce_range: auto`, `bias_correction`, `equalize` on Conv1d (Silero VAD's layout,
  tests/models/conv1d_stack.py): "not enough values to unpack", a ReduceMean rank
  error, an AxisError — each written for Conv2d only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgebuild.core.artifact import Artifact
from edgebuild.passes.quantize import Quantize
from edgebuild.quant.params import QuantizeParams
from tests.conftest import load_module
from tests.integration.passes.conftest import as_artifact, context

torch = pytest.importorskip("torch", reason="the test models are PyTorch modules")
pytest.importorskip("onnxruntime", reason="needs onnxruntime")
pytestmark = pytest.mark.onnxruntime

MODELS = Path(__file__).resolve().parents[2] / "models"


def _module(name: str) -> Any:
    return load_module(MODELS / f"{name}.py")


def _export(module: Any, folder: Path, shape: list[int], name: str) -> Artifact:
    folder.mkdir(parents=True)
    torch.onnx.export(module.build(), (torch.zeros(*shape),), str(folder / "model.onnx"),
                      input_names=[name], output_names=["out"], opset_version=17,
                      dynamo=False)
    return as_artifact(folder, "onnx", "model.onnx")


def _recipe(model: Artifact, name: str, shape: list[int], data: Path) -> dict[str, Any]:
    return {"model": {"onnx": str(model.main)}, "outputs": ["out"],
            "inputs": [{"name": name, "shape": shape, "dtype": "float32", "dynamic_axes": {}}],
            "datasets": {"cal": {"kind": "npz", "path": str(data)}}}


def _outputs(path: Path, name: str, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


@pytest.fixture(scope="module")
def dark_first(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The YOLO-style head (tests/models/yolo_head_gate.py) and calibration photos whose
    first is black but for one faint pixel: its pooled features span ~10⁻¹³."""
    folder = tmp_path_factory.mktemp("hist")
    module = _module("yolo_head_gate")
    shape = [1, 3, 320, 320]
    model = _export(module, folder / "export", shape, "images")
    dark = np.zeros((1, 3, 320, 320), np.float32)
    dark[0, :, 0, 0] = 1e-9
    x = np.concatenate([dark, module.photos(4).numpy()])
    np.savez(folder / "cal.npz", x=x)
    return {"model": model, "recipe": _recipe(model, "images", shape, folder / "cal.npz"),
            "x": x}


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_histogram_methods_calibrate_after_a_dark_first_image(
        tmp_path: Path, dark_first: dict[str, Any], method: str) -> None:
    ctx = context(tmp_path / "q", {"model": dark_first["model"]}, dark_first["recipe"])
    result = Quantize().run(ctx, QuantizeParams(mode="static", calibration="cal",
                                                method=method, compare_samples=0))
    x = dark_first["x"][1:]
    fp32 = _outputs(dark_first["model"].main, "images", x)
    int8 = _outputs(tmp_path / "q" / result.main, "images", x)
    # the class scores (rows 4..) within a few codes of FP32: ranges from all the photos
    assert np.abs(fp32[:, 4:] - int8[:, 4:]).max() < 0.05


def test_streamed_histograms_equal_onnx_runtimes_all_at_once() -> None:
    """One sample a call gives ORT's own thresholds of one call with every sample, within
    a bin, and keeps ORT's bin count (main grew it to the first sample's bin width)."""
    from onnxruntime.quantization.calibrate import HistogramCollector

    from edgebuild.quant.engines.ort_histograms import streamed_histograms

    rng = np.random.default_rng(0)
    samples = [rng.normal(0, s, 4000).astype(np.float32) for s in (1e-4, 1.0, 3.0, 0.5)]
    samples.append(np.abs(samples[2]) * 2)  # a later sample widens the range again
    for method, symmetric, bins in (("percentile", True, 2048), ("percentile", False, 2048),
                                    ("entropy", False, 128)):
        args = (method, symmetric, bins, 128, 99.9, "same")
        at_once = HistogramCollector(*args)
        at_once.collect({"t": samples})
        with streamed_histograms():
            from onnxruntime.quantization import calibrate

            streamed = calibrate.HistogramCollector(*args)  # as ORT's calibrator finds it
            for sample in samples:
                streamed.collect({"t": [sample]})
        assert isinstance(streamed, HistogramCollector)
        assert len(streamed.histogram_dict["t"][0]) == bins
        assert streamed.histogram_dict["t"][0].sum() == sum(s.size for s in samples)
        want = at_once.compute_collection_result()["t"]
        got = streamed.compute_collection_result()["t"]
        width = 2 * 6.1 / bins  # one bin of the widest range (|x| up to ~6.1)
        assert abs(float(got[0]) - float(want[0])) <= 2 * width, (method, got, want)
        assert abs(float(got[1]) - float(want[1])) <= 2 * width, (method, got, want)


@pytest.fixture(scope="module")
def conv1d(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("conv1d")
    module = _module("conv1d_stack")
    shape = [1, 1, 512]
    model = _export(module, folder / "export", shape, "audio")
    x = module.audio().numpy()
    np.savez(folder / "cal.npz", x=x)
    return {"model": model, "recipe": _recipe(model, "audio", shape, folder / "cal.npz"),
            "x": x}


@pytest.mark.parametrize("lever", [{"reduce_range": "auto"}, {"bias_correction": True},
                                   {"equalize": {"clip": "exact"}}],
                         ids=["reduce_range", "bias_correction", "equalize"])
def test_levers_take_conv1d(tmp_path: Path, conv1d: dict[str, Any],
                            lever: dict[str, Any]) -> None:
    ctx = context(tmp_path / "q", {"model": conv1d["model"]}, conv1d["recipe"])
    result = Quantize().run(ctx, QuantizeParams(mode="static", calibration="cal",
                                                compare_samples=0, **lever))
    meta = result.metadata
    convs = 3
    if "reduce_range" in lever:
        assert len(meta["reduce_range_auto"]["overflow_rate"]) == convs, meta
    elif "bias_correction" in lever:
        assert meta["bias_correction"]["layers"] == convs, meta
    else:
        assert meta["equalize"]["pairs"] == 2 and meta["equalize"]["scaled_channels"] > 0
        assert meta["equalize"]["fp32_max_abs_diff"] < 1e-4, "the float function is kept"
    fp32 = _outputs(conv1d["model"].main, "audio", conv1d["x"])
    int8 = _outputs(tmp_path / "q" / result.main, "audio", conv1d["x"])
    cosine = float(np.dot(fp32.ravel(), int8.ravel()) /
                   (np.linalg.norm(fp32) * np.linalg.norm(int8)))
    assert cosine > 0.95, f"the INT8 build still follows FP32 (cosine {cosine:.4f})"
