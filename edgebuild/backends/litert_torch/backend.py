"""LiteRT-Torch: PyTorch -> .tflite directly, for Android phones (no ONNX, no onnx2tf).

    PyTorch ─ litert_torch.convert ─▶ model.tflite (float32, NCHW kept)
            ─ [int8: ai-edge-quantizer static_wi8_ai8, calibrated] ─▶ model.tflite
            + nnapi_coverage.md (as the tflite backend's)

Google's own PyTorch route to LiteRT (the `tflite` backend reaches it from ONNX through
onnx2tf and TensorFlow). Its targets skip the recipe's ONNX passes
(`inherit_passes: false`), as ExecuTorch's do. Everything after the compile is the
`tflite` backend's (TfliteRuntime, tflite/runtime.py): the same .tflite format, so the
same interpreter on this host (accuracy, and latency labelled a host figure with
`latency_on: host`), the same benchmark_model on a phone over adb, the same probes and
per-op profile, read from the same runtime options (options.py).

Not in the default install: litert-torch declares xdsl, which pins typing-extensions
< 4.13 and so pydantic down to 2.11; it works with the project's versions when installed
`--no-deps` (convert.INSTALL), ~700 MB with JAX.
"""

from __future__ import annotations

import time
from typing import ClassVar

from edgebuild.backends.base import Backend
from edgebuild.backends.litert_torch.options import LitertTorchOptions, Precision
from edgebuild.backends.tflite.backend import coverage_summary
from edgebuild.backends.tflite.runtime import TfliteRuntime
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target

MODEL = "model.tflite"


class LitertTorchBackend(TfliteRuntime, Backend[LitertTorchOptions]):
    name = "litert-torch"
    summary = "PyTorch -> LiteRT (.tflite) with LiteRT-Torch, float32/int8 (host interpreter "\
              "here; phones over adb)"
    accepts = ("pytorch",)
    produces = "tflite"
    tools: ClassVar[tuple[str, ...]] = ("litert-torch", "litert-converter", "ai-edge-quantizer",
                                        "ai-edge-litert", "torch")
    device_tools: ClassVar[tuple[str, ...]] = ("ai-edge-litert",)
    version = 1
    # No pip extra: its declared pins would downgrade pydantic (convert.py, INSTALL).
    install_hint = ("pip install --no-deps litert-torch==0.10.0 … (docs/backends-tflite.md, "
                    "\"LiteRT-Torch\")")
    runner_metadata = ("io",)

    def compile_probe(self, target: Target) -> str:
        """Not installed: "not buildable here", asked again every run (nothing imported)."""
        from importlib.util import find_spec

        missing = [name for name in ("litert_torch", "ai_edge_quantizer") if find_spec(name)
                   is None]
        return (f"not buildable here: LiteRT-Torch is not installed ({', '.join(missing)}): "
                "it is not in the default install; EDGEBUILD_LITERT_TORCH=1 bash "
                "scripts/setup.sh adds it (docs/backends-tflite.md, \"LiteRT-Torch\")"
                if missing else "")

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        import torch

        from edgebuild.backends.litert_torch import convert
        from edgebuild.backends.tflite import nnapi
        from edgebuild.backends.tflite.tensors import io_spec
        from edgebuild.passes.torch_capture import example_inputs
        from edgebuild.passes.torch_model import load_stage_model

        options = self.options(target)
        tensors, outputs = ctx.io.inputs, ctx.io.outputs
        started = time.perf_counter()
        model = load_stage_model(ctx).eval()
        inputs = example_inputs(tensors)  # static: the .tflite is built at these shapes
        with torch.no_grad():
            produced = model(*inputs)
        produced = produced if isinstance(produced, tuple | list) else (produced,)
        destination = ctx.out / MODEL
        seconds = {"convert_seconds": round(convert.to_tflite(model, inputs, destination), 2)}
        used = 0
        if options.precision is not Precision.FLOAT32:
            assert options.calibration_dataset is not None  # the options' validator
            calibration = ctx.dataset(options.calibration_dataset)
            used = min(len(calibration), options.calibration_samples)
            signature, names = convert.signature_inputs(destination)
            feeds = [{name: calibration.feed(i)[t["name"]]
                      for name, t in zip(names, tensors, strict=True)}
                     for i in range(used)]
            bits = 8 if options.precision is Precision.INT8 else 16
            seconds["quantize_seconds"] = round(
                convert.quantize(destination, signature, feeds, destination, bits), 2)
        io = io_spec(destination, {
            "onnx_inputs": {t["name"]: [int(d) for d in x.shape]
                            for t, x in zip(tensors, inputs, strict=True)},
            "onnx_outputs": {name: [int(d) for d in y.shape]
                             for name, y in zip(outputs, produced, strict=True)},
            "recipe_dtypes": {t["name"]: t["dtype"] for t in tensors
                              if t["dtype"].startswith("int")},
            "layout": "NCHW"})
        rows = nnapi.coverage(nnapi.model_ops(destination), options.android_api_level)
        (ctx.out / "nnapi_coverage.md").write_text(
            nnapi.render_markdown(rows, options.android_api_level))
        return OpResult(main=MODEL, format=self.produces, metadata={
            "precision": options.precision.value, "io": io, "calibration_samples": used,
            "converter": "litert-torch", "notes": ["nnapi_coverage.md"],
            "nnapi": coverage_summary(rows, options.android_api_level), "ships": [MODEL],
            **seconds, "compile_seconds": round(time.perf_counter() - started, 2)})

