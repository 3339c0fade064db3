"""LiteRT-Torch: PyTorch -> .tflite directly, for Android phones (no ONNX, no onnx2tf).

    PyTorch ─ litert_torch.convert ─▶ model.tflite (float32, NCHW kept)
            ─ [int8: ai-edge-quantizer static w8a8, calibrated; `keep_float` modules
               left float (layers.py), biases corrected first (bias.py)] ─▶ model.tflite
            + nnapi_coverage.md (as the tflite backend's)

Google's own PyTorch route to LiteRT (the `tflite` backend reaches it from ONNX through
onnx2tf and TensorFlow). Its targets skip the recipe's ONNX passes
(`inherit_passes: false`), as ExecuTorch's do. Everything after the compile is the
`tflite` backend's (TfliteRuntime, tflite/runtime.py): the same .tflite format, so the
same interpreter on this host (accuracy, and latency labelled a host figure with
`latency_on: host`), the same benchmark_model on a phone over adb, the same probes and
per-op profile, read from the same runtime options (options.py).

In the default install, `--no-deps`: litert-torch declares xdsl, which pins
typing-extensions < 4.13 and so pydantic down to 2.11; it works with the project's
versions installed without its declared dependencies (scripts/setup.sh, with the tflite
and executorch extras; convert.INSTALL), ~700 MB with JAX.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

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
    # No pip extra: its declared pins would downgrade pydantic; scripts/setup.sh installs
    # it --no-deps (convert.py, INSTALL).
    install_hint = ("pip install --no-deps litert-torch==0.10.0 … (docs/backends-tflite.md, "
                    "\"LiteRT-Torch\")")
    runner_metadata = ("io",)

    def compile_probe(self, target: Target) -> str:
        """Not installed: "not buildable here", asked again every run (nothing imported)."""
        from importlib.util import find_spec

        missing = [name for name in ("litert_torch", "ai_edge_quantizer") if find_spec(name)
                   is None]
        if not missing:
            return ""
        from edgebuild.backends.litert_torch.convert import INSTALL

        return (f"not buildable here: LiteRT-Torch is not installed ({', '.join(missing)}): "
                f"{INSTALL}")

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        import torch

        from edgebuild.backends.executorch.lower import float_modules
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
        keep = float_modules(model, options.keep_float)  # a PlanError names an unknown one
        destination = ctx.out / MODEL
        quantized: dict[str, Any] = {}
        used, feeds = 0, []
        if options.precision is not Precision.FLOAT32:
            assert options.calibration_dataset is not None  # the options' validator
            calibration = ctx.dataset(options.calibration_dataset)
            used = min(len(calibration), options.calibration_samples)
            feeds = [{t["name"]: calibration.feed(i)[t["name"]] for t in tensors}
                     for i in range(used)]
        converted = model
        if options.precision is Precision.INT8 and options.bias_correction:
            converted, shifts = _corrected(model, inputs, feeds, [t["name"] for t in tensors],
                                           keep)
            quantized["bias_corrected"] = {"layers": len(shifts),
                                           "largest_shift": max(shifts.values(), default=0.0)}
        seconds = {"convert_seconds": round(convert.to_tflite(converted, inputs, destination),
                                            2)}
        upstream = {
            "onnx_inputs": {t["name"]: [int(d) for d in x.shape]
                            for t, x in zip(tensors, inputs, strict=True)},
            "onnx_outputs": {name: [int(d) for d in y.shape]
                             for name, y in zip(outputs, produced, strict=True)},
            "recipe_dtypes": {t["name"]: t["dtype"] for t in tensors
                              if t["dtype"].startswith("int")},
            "layout": "NCHW"}
        if options.precision is not Precision.FLOAT32:
            patterns = _float_scopes(model, inputs, keep, destination)
            quantized["kept_float_ops"] = {module: count for module, (_, count)
                                           in patterns.items()}
            bits = 8 if options.precision is Precision.INT8 else 16
            seconds["quantize_seconds"] = round(convert.quantize(
                destination, convert.signature_key(destination),
                _model_feeds(feeds, io_spec(destination, upstream)), destination, bits,
                [regex for regex, _ in patterns.values()]), 2)
        io = io_spec(destination, upstream)
        rows = nnapi.coverage(nnapi.model_ops(destination), options.android_api_level)
        (ctx.out / "nnapi_coverage.md").write_text(
            nnapi.render_markdown(rows, options.android_api_level))
        return OpResult(main=MODEL, format=self.produces, metadata={
            "precision": options.precision.value, "io": io, "calibration_samples": used,
            "converter": "litert-torch", "notes": ["nnapi_coverage.md"],
            "nnapi": coverage_summary(rows, options.android_api_level), "ships": [MODEL],
            "kept_float": _kept_float(options), "quantization": quantized or None,
            **seconds, "compile_seconds": round(time.perf_counter() - started, 2)})


def _corrected(model: Any, inputs: tuple[Any, ...], feeds: list[dict[str, Any]],
               names: list[str], keep: list[str]) -> tuple[Any, dict[str, float]]:
    """bias.corrected on the calibration `feeds` (by recipe input name), in `names`' order."""
    import torch

    from edgebuild.backends.litert_torch import bias

    positional = [tuple(torch.from_numpy(feed[name]) for name in names) for feed in feeds]
    return bias.corrected(model, inputs, positional, keep)


def _model_feeds(feeds: list[dict[str, Any]], io: dict[str, Any]) -> list[dict[str, Any]]:
    """The recipe's calibration `feeds` as the float .tflite takes them: by its signature
    names, narrowed where the converter narrowed an input (int64 token ids to int32,
    range-checked: tflite/runner.to_model)."""
    from edgebuild.backends.tflite.runner import to_model

    return [{t["model_name"]: to_model(feed[t["name"]], t) for t in io["inputs"]}
            for feed in feeds]


def _float_scopes(model: Any, inputs: tuple[Any, ...], keep: list[str],
                  converted: Path) -> dict[str, tuple[str, int]]:
    """{kept module: (its ai-edge-quantizer regex, the ops of `converted` it finds)}; a
    StageError names a module that finds none (layers.py)."""
    if not keep:
        return {}
    from edgebuild.backends.executorch.lower import export
    from edgebuild.backends.litert_torch import layers

    exported = export(model, inputs, "torch.export (keep_float's op names)")
    found = layers.scopes(exported, keep)
    produced = layers.produces(exported, keep)
    written = layers.output_names(converted) if produced else []
    patterns = {module: layers.pattern(found[module], [written[i] for i in produced.get(
                    module, []) if i < len(written)]) for module in keep if module in found}
    counts = {module: 0 for module in keep} | layers.matched(converted, patterns)
    layers.check(counts)
    return {module: (patterns[module], counts[module]) for module in keep}


def _kept_float(options: LitertTorchOptions) -> dict[str, Any] | None:
    """What stayed float in this build, and what of the shared INT8 rules (quant/safety.py)
    it does not do."""
    if options.precision is Precision.FLOAT32:
        return None
    kept = ([f"kept float by ai-edge-quantizer (keep_float): {', '.join(options.keep_float)}"]
            if options.keep_float else [])
    return {"nodes": list(options.keep_float), "applies": False, "notes": [*kept,
        "ai-edge-quantizer quantizes every op it supports but those: the INT8 rules' "
        "automatic float nodes (mixed-range Concat/Add, output tail, signal front end) are "
        "not applied to this path yet (bias correction is: `bias_correction`)"]}
