"""How a .tflite runs, here and on a phone: the half of a backend that every backend whose
artifact is a .tflite shares (tflite from ONNX through onnx2tf, litert-torch from PyTorch).

    class TfliteBackend(TfliteRuntime, Backend[TfliteOptions])         compile: onnx2tf's
    class LitertTorchBackend(TfliteRuntime, Backend[LitertTorchOptions])  compile: LiteRT-Torch

The runner (ai-edge-litert's interpreter, XNNPACK), the phone (benchmark_model over adb),
the probes and the per-op profile read only the options of TfliteRuntimeOptions, which
both backends' options models extend.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from edgebuild.backends.base import Runner
from edgebuild.backends.tflite.options import (
    Delegate,
    DelegateFallback,
    LatencyOn,
    TfliteRuntimeOptions,
)
from edgebuild.core.profile import RunnerKind
from edgebuild.core.target import Target

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import LatencyRecord, OpProfile
    from edgebuild.recipe.common import MeasureSettings


class TfliteRuntime:
    """Mixed in before `Backend[...]`: its methods are the backend's runtime side."""

    @staticmethod
    def runtime_options(target: Target) -> TfliteRuntimeOptions:
        """The target's options that say how the .tflite runs (the rest are its
        compiler's, checked by its backend's own options model)."""
        fields = TfliteRuntimeOptions.model_fields
        return TfliteRuntimeOptions.model_validate(
            {key: value for key, value in target.options.items() if key in fields})

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        from edgebuild.backends.tflite.runner import TfliteRunner

        options = self.runtime_options(target)
        return TfliteRunner(artifact.main, artifact.metadata["io"], threads,
                            use_xnnpack=options.delegate is not Delegate.CPU,
                            fallback=options.delegate_fallback is DelegateFallback.BUILTIN)

    def memory_measurable(self, target: Target) -> bool:
        """On the host the runner runs ai-edge-litert in the measuring process, so
        measuring/footprint.py reads its peak memory as for ONNX Runtime; on a phone the
        memory is benchmark_model's (device.py)."""
        return self.runtime_options(target).latency_on is LatencyOn.HOST

    def op_profile(self, artifact: Artifact, target: Target, threads: int | None,
                   feeds: dict[str, np.ndarray], shapes: dict[str, list[int]],
                   runs: int) -> OpProfile | None:
        """LiteRT's C API profiler on this host (profile.py). On a phone the profile is
        benchmark_model's (device.py, with the latency: `device_latency`)."""
        from edgebuild.backends.tflite.profile import op_profile
        from edgebuild.measure.record import OpProfile

        options = self.runtime_options(target)
        if options.latency_on is LatencyOn.DEVICE:
            return OpProfile(unmeasurable="not measurable here: this target's latency runs "
                             "on the phone; its per-op profile is benchmark_model's, taken "
                             "with the on-device latency")
        return op_profile(artifact.main, artifact.metadata["io"], threads,
                          options.delegate is not Delegate.CPU, feeds, runs)

    def _probe(self, target: Target, purpose: str) -> str | None:
        # On the phone: adb (`devices -l`, a file test on the phone). Else '': measurable.
        return self.unmeasurable_reason(target, purpose) if purpose == "latency" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        options = self.runtime_options(target)
        if purpose == "latency" and options.latency_on is LatencyOn.DEVICE:
            from edgebuild.backends.tflite import device

            return device.unavailable_reason(target.phone_serial(options.device_serial),
                                             options.benchmark_model)
        return ""  # accuracy, and host latency: ai-edge-litert runs here

    def where(self, target: Target, purpose: str = "latency") -> str:
        options = self.runtime_options(target)
        if purpose == "latency" and options.latency_on is LatencyOn.DEVICE:
            return f"device: Android phone over adb, {options.delegate.value} delegate"
        kernels = "builtin kernels" if options.delegate is Delegate.CPU else "XNNPACK"
        if target.runs_on.kind is RunnerKind.EMULATED:  # the phone's CPU kernels, emulated
            return f"ai-edge-litert interpreter, {kernels} (the phone's CPU path)"
        return (f"host: {platform.machine()} ai-edge-litert interpreter, {kernels} — a host "
                f"figure, not the phone's ({options.delegate.value} delegate)")

    def device_latency(self, artifact: Artifact, target: Target,
                       settings: MeasureSettings) -> LatencyRecord | None:
        options = self.runtime_options(target)
        if options.latency_on is not LatencyOn.DEVICE:
            return None
        from edgebuild.backends.tflite import device
        from edgebuild.measure.record import LatencyRecord, read_record

        return read_record(LatencyRecord, device.benchmark(
            artifact.main, delegate=options.delegate.value, threads=settings.threads,
            warmup_runs=settings.warmup_iterations, num_runs=settings.min_iterations,
            serial=target.phone_serial(options.device_serial), binary=options.benchmark_model,
            fallback=options.delegate_fallback is DelegateFallback.BUILTIN,
            op_profile=settings.profile),
            "the phone's benchmark_model")
