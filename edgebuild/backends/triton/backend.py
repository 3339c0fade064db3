"""NVIDIA Triton Inference Server: the recipe's ONNX as a Triton model repository, with
the recipe's pre/post-processing as an ensemble, served and measured for real.

    ONNX ─ repository.write ─▶ repository/ (model: onnxruntime; preprocess, postprocess:
                                            python; ensemble)
    accuracy: the dataset through the served `model` (HTTP)   ─▶ the accuracy gate vs FP32
    latency:  perf_analyzer over a concurrency sweep of the ensemble ─▶ p99, throughput,
              and the server's per-model statistics (queue, compute input/infer/output)

The server is the real Triton 2.51.0 binary bundled in `nvidia-pytriton`, in a venv of
its own (env.py); it has only the Python backend, so a Python-based stand-in serves
`backend: "onnxruntime"` here and the repository stays what a full Triton loads unchanged.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from edgebuild.backends.base import Backend, Runner
from edgebuild.backends.declaration import Capabilities
from edgebuild.backends.triton.options import TritonOptions
from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.target import Target

if TYPE_CHECKING:
    from edgebuild.core.artifact import Artifact
    from edgebuild.measure.record import LatencyRecord
    from edgebuild.recipe.common import MeasureSettings

REPOSITORY = "repository"
SERVER = "Triton 2.51.0 (nvidia-pytriton 0.7.0's server, Python backend only)"


class TritonBackend(Backend[TritonOptions]):
    name = "triton"
    summary = "NVIDIA Triton model repository (+ pre/post ensemble), served and measured here"
    accepts = ("onnx",)
    produces = "triton-repository"
    tools: ClassVar[tuple[str, ...]] = ("onnx",)
    version = 1  # the repository layout; bump when it changes
    runner_metadata: ClassVar[tuple[str, ...]] = ("triton",)
    capabilities = Capabilities(measures_memory=False)

    def compile(self, ctx: StageContext, target: Target) -> OpResult:
        from edgebuild.backends.triton import repository

        started = time.perf_counter()
        info = repository.write(ctx.input().main, ctx.out / REPOSITORY, ctx.io.inputs,
                                self.options(target))
        return OpResult(main=REPOSITORY, format=self.produces, metadata={
            "triton": info, "ships": [REPOSITORY],
            "compile_seconds": round(time.perf_counter() - started, 2)})

    def runner(self, artifact: Artifact, target: Target, threads: int | None) -> Runner:
        from edgebuild.backends.triton.runner import TritonRunner

        return TritonRunner(artifact.main, artifact.metadata["triton"], threads)

    def _probe(self, target: Target, purpose: str) -> str | None:
        return self.unmeasurable_reason(target, purpose) if purpose != "build" else None

    def unmeasurable_reason(self, target: Target, purpose: str = "latency") -> str:
        from edgebuild.backends.triton.env import find_env

        found = find_env()
        return found if isinstance(found, str) else super().unmeasurable_reason(target, purpose)

    def where(self, target: Target, purpose: str = "latency") -> str:
        how = ("perf_analyzer over HTTP" if purpose == "latency" else "the served model over "
               "HTTP")
        return (f"{SERVER} on this host, onnxruntime served by a Python-based stand-in; "
                f"{how}")

    def device_latency(self, artifact: Artifact, target: Target,
                       settings: MeasureSettings) -> LatencyRecord | None:
        """perf_analyzer's sweep: the latency figures are the first level's percentiles
        of what a client calls (the ensemble when there is one), the sweep and the
        per-model breakdown go in `serving`, the highest level's rate in `throughput`."""
        import tempfile
        from pathlib import Path

        from edgebuild.backends.triton import env, perf, server
        from edgebuild.errors import StageError
        from edgebuild.measure.conditions import conditions
        from edgebuild.measure.record import Conditions, LatencyRecord

        options = self.options(target)
        info = artifact.metadata["triton"]
        found = env.find_env()
        if isinstance(found, str):
            raise StageError(found)
        model = (info["ensemble"] or {}).get("name") or info["model"]
        before = conditions(settings.threads)
        with tempfile.TemporaryDirectory(prefix="edgebuild-perf-") as work, server.serve(
                artifact.main, found, Path(work) / "tritonserver.log",
                settings.threads) as running:
            sweep = perf.sweep(found, running.url, model, options.concurrency,
                               options.measurement_interval_ms, Path(work),
                               info.get("perf_shapes", []),
                               info.get("perf_zeros", False))
        after = conditions(settings.threads)
        first, top = sweep["levels"][0], max(sweep["levels"], key=lambda r: r["fps"])
        measured = Conditions.model_validate({
            **before, "load_average_after": after["load_average"],
            "settings": settings.model_dump()})
        return LatencyRecord.model_validate({
            "n": first["requests"], "p50": first["p50"], "p90": first["p90"],
            "p95": first["p95"], "p99": first["p99"], "conditions": measured,
            "source": f"perf_analyzer 2.51.0, concurrency {first['concurrency']}",
            "command": sweep["command"], "unit": "ms",
            "percentiles": "perf_analyzer's client-side percentiles over its stable windows",
            "throughput": {"streams": top["concurrency"], "fps": top["fps"],
                           "requests": top["requests"], "p50": top["p50"], "p90": top["p90"],
                           "how": "perf_analyzer, the sweep's best level"},
            "serving": {"model": model, "server": SERVER, "command": sweep["command"],
                        "levels": sweep["levels"]}})
