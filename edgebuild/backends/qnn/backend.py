"""Qualcomm QNN (Snapdragon HTP) through onnxruntime-qnn: compiled here, checked here.

    ONNX ─ quantize_for_htp (int8/int16 QDQ; fp16, qdq: as is) ─ session with ep.context_enable
         ─▶ model_ctx.onnx + model_ctx_qnn.bin (the context binary for the profile's SoC)
            + qnn_partition.md (which nodes the HTP took, which fell back to the CPU)

Accuracy runs the compiled context model on the x86 HTP emulator that ships in
onnxruntime-qnn: the HTP's real numerics, labelled as emulator figures. Its speed
is nothing like the phone's, so latency comes only from a phone (not implemented
yet: with or without one attached, "not measurable here" says exactly what is
missing). Whether a context binary built here loads on a given phone cannot be
checked without the phone: the SoC model and HTP arch in the profile must match it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.declaration import Capabilities
from edgebuild.backends.qnn.options import CpuFallback, QnnOptions, QnnPrecision
from edgebuild.backends.qnn.runner import QnnRunner
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target
from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import OpProfile

CONTEXT_MODEL = "model_ctx.onnx"


class QnnBackend(Backend[QnnOptions]):
    name = "qnn"
    summary = "Qualcomm QNN context binary via onnxruntime-qnn (x86 HTP emulator here)"
    accepts = ("onnx",)
    produces = "qnn-context"
    tools: ClassVar[tuple[str, ...]] = ("onnxruntime", "onnxruntime-qnn", "onnx")
    # 6: Pow(x, 2) as Mul(x, x); 5: qnn_nodes.json (the profile's op types); 4: precision
    # qdq; 3: fp16 takes a uint8 input through DequantizeLinear, not Cast; 2: per-channel
    # by default; keep_float / mixed_range_bound options
    version = 6
    # measure-latency takes the emulator's per-op profile when asked, with its latency
    # still "not measurable here" (profile.py; measuring/latency.py)
    capabilities = Capabilities(profiles_without_latency=True)
    extra = "qnn"

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        from edgebuild.backends.qnn import partition, props
        from edgebuild.backends.qnn.quantize import given_qdq, quantize_for_htp
        from edgebuild.backends.qnn.session import session

        options = self.options(target)
        source = ctx.input().main
        metadata: dict[str, Any] = {"precision": options.precision.value,
                                    "soc_model": options.soc_model,
                                    "htp_arch": options.htp_arch}
        started = time.perf_counter()
        model = static = bare = _static(source, ctx)
        from edgebuild.backends.qnn.squares import squares_as_products

        # The HTP's Pow(x, 2) is wrong on some elements; x·x is not (squares.py).
        squared = ctx.out / "squares.onnx"
        metadata["pow_as_mul"] = squares_as_products(static, squared)
        if metadata["pow_as_mul"]:
            if static != source:
                static.unlink()
            model = static = bare = squared
        if options.precision is QnnPrecision.FP16:
            from edgebuild.backends.qnn.inputs import dequantize_cast_inputs

            # A uint8 image's input Cast loses the image on the HTP at fp16 (inputs.py).
            floated = ctx.out / "fp16_inputs.onnx"
            metadata["inputs_dequantized"] = dequantize_cast_inputs(static, floated)
            if metadata["inputs_dequantized"]:
                if static != source:
                    static.unlink()
                model = static = bare = floated
        if options.precision is QnnPrecision.QDQ:
            metadata["quantization"] = given_qdq(static)
        elif options.precision is not QnnPrecision.FP16:
            assert options.calibration_dataset is not None  # the options model checks it
            model = ctx.out / "qdq.onnx"  # scratch: the context binary is what ships
            # onnxruntime's QNN preprocessing crashes on any metadata_props (props.py).
            bare, kept = props.set_aside(static, ctx.out / "bare.onnx")
            metadata["quantization"] = quantize_for_htp(
                bare, model, options.precision.value,
                ctx.dataset(options.calibration_dataset), options.calibration_samples,
                options.per_channel, options.keep_float.value, options.mixed_range_bound)
            props.put_back(model, kept)
        context = ctx.out / CONTEXT_MODEL
        try:
            # The CPU EP stays on: it runs the graph I/O (de)quantization by design. What
            # else lands there is what the HTP refused, judged below from the result.
            session(model, options.provider_options(), cpu_fallback=True,
                    context_file=context)
        except Exception as exc:  # the EP's own message; there is no partition to read
            from edgebuild.passes.fold_inputs import with_fold_hint

            raise with_fold_hint(StageError(f"QNN could not compile the model: {exc}"),
                                 model, ctx.io.inputs) from None
        if not context.is_file():  # no EPContext at all: not one node went to the HTP
            raise StageError("the HTP took no node of the model",
                             "unsupported dtypes or dynamic shapes are the usual cause")
        found = partition.partition(model, context)
        from edgebuild.backends.qnn.profile import NODES_FILE, write_nodes

        write_nodes(model, ctx.out / NODES_FILE)  # the profile's op types (profile.py)
        for scratch in {static, bare, model} - {source}:
            scratch.unlink()  # pinned shapes, QDQ: inputs of the context binary, not results
        if found.cpu and options.cpu_fallback is CpuFallback.FAIL:
            named = "; ".join(f"{op}: {', '.join(names[:5])}"
                              for op, names in sorted(found.cpu.items()))
            raise StageError(f"the HTP cannot run {found.cpu_nodes} node(s) ({named})",
                             "replace or remove those ops, or set the target option "
                             "`cpu_fallback: report` to run them on the CPU and see the table")
        soc = f"SoC model {options.soc_model}, HTP v{options.htp_arch}"
        (ctx.out / "qnn_partition.md").write_text(partition.render_markdown(found, soc))
        binaries = sorted(p.name for p in ctx.out.glob("*.bin"))
        metadata.update({
            "partition": found.summary(), "notes": ["qnn_partition.md"],
            "context_binaries": binaries,
            "context_bytes": sum((ctx.out / b).stat().st_size for b in binaries),
            "compile_seconds": round(time.perf_counter() - started, 2)})
        return OpResult(main=CONTEXT_MODEL, format=self.produces, metadata=metadata)

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        options = self.options(target)
        return QnnRunner(artifact.main, options, threads)

    def _probe(self, target: Target, purpose: str) -> str | None:
        # Latency: `adb devices -l` and a sentence. Accuracy imports onnxruntime-qnn.
        return self.unmeasurable_reason(target, purpose) if purpose == "latency" else None

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """QNN's own per-op profile on the x86 HTP emulator: the emulator's, never the
        phone's time (profile.py)."""
        from edgebuild.backends.qnn.profile import op_profile
        from edgebuild.backends.qnn.session import qnn_devices

        qnn_devices()  # BackendUnavailable without onnxruntime-qnn
        return op_profile(artifact.main, self.options(target), threads,
                          feeds, runs)

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        if purpose == "accuracy":
            from edgebuild.backends.qnn.session import qnn_devices

            qnn_devices()  # BackendUnavailable (a clear message) without onnxruntime-qnn
            return ""  # the HTP emulator runs the context model here
        from edgebuild.devices.adb import connect

        options = self.options(target)
        found = connect(target.phone_serial(options.device_serial))
        if isinstance(found, str):  # no adb, no phone, two phones: say which, for QNN
            return ("not measurable here: no Snapdragon device attached ("
                    + found.removeprefix("not measurable here: ") + "); the HTP emulator's "
                    "speed is not a latency figure")
        return (f"not measurable here: {found.device.describe()} is attached, but timing a "
                "QNN context binary on the phone is not implemented yet")

    def where(self, target: Target, purpose: str = "latency") -> str:
        if purpose != "accuracy":
            return ""
        from importlib.metadata import version

        return (f"host: x86-64 QNN HTP emulator (onnxruntime-qnn {version('onnxruntime-qnn')})"
                " — the HTP's numerics, not the phone's speed")


def _static(source: Path, ctx: StageContext) -> Path:
    """`source`, or a copy with its dynamic input dimensions pinned to the recipe's shapes:
    the HTP takes static shapes only (a dynamic batch kept every node on the CPU)."""
    import onnx

    from edgebuild.passes.onnx_shapes import pin_input_shapes, pinned_shapes

    pinned = pinned_shapes(onnx.load(str(source), load_external_data=False), ctx.io.inputs,
                           "a QNN context binary")
    if not pinned:
        return source
    static = ctx.out / "static.onnx"
    pin_input_shapes(source, static, pinned)
    return static
