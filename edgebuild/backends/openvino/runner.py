"""Run an OpenVINO IR through one synchronous InferRequest.

One request created at activation and reused keeps per-call overhead to the
input bind and the copy of the outputs, which is what a latency measurement of
a single-stream edge deployment should see (it is also what `benchmark_app
-hint latency` times).

Each load reads back the precision the device plugin really runs: when it is not
the one the target asks for (a hint the CPU has no native support for runs in the
plugin's default: bf16 as f32 on an AVX2-only CPU, f16 as bf16 on one with AVX-512 BF16
but no FP16) or the target
leaves it to OpenVINO (`inference_precision: default`), the runner says what ran in
`fallback`, which every accuracy and latency figure carries ("bf16 requested; this
CPU has no native bf16 (…): ran as f32").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.backends.openvino import ir
from edgebuild.errors import ShapeError

if TYPE_CHECKING:
    import numpy as np


class OpenVinoRunner(Runner):
    def __init__(self, model: Path, device: str, config: dict[str, Any]) -> None:
        super().__init__()
        self.model = model
        self.device = device
        self.config = config
        self._request: Any = None
        self._compiled: Any = None
        self.precision = ""  # what the plugin runs, as ir.precision_label says it
        self._inputs: TensorMeta = {}
        self._outputs: list[tuple[Any, str]] = []
        self._share_inputs = False

    def _activate(self) -> None:
        ov = ir.load_openvino()
        core = ov.Core()
        self._load(core, core.read_model(str(self.model)))

    def _reshape(self, shapes: dict[str, list[int]]) -> None:
        """A static IR built at the example shape: reshape the model to the profile's shapes
        and compile it again (what an app does for a new input size); OpenVINO's refusal
        (a Reshape constant baked for the old size) is a ShapeError naming the input.

        A dynamic IR is never reshaped: it takes every size its dims allow, so a shape
        asked for here is outside the bounds `shapes: dynamic` set from the profiles
        (shapes.shape_model), and reshaping would silently drop them."""
        for name in sorted(shapes):
            dims = self._inputs[name][0]
            if any(isinstance(d, str) for d in dims):
                shown = "[" + ", ".join(str(d) for d in dims) + "]"
                raise ShapeError(
                    f"input '{name}' of this dynamic IR takes {shown} (its dynamic dims "
                    f"bounded by the recipe's shape profiles); {shapes[name]} is outside",
                    "add a profile of this size to `shapes:` (the bounds span the "
                    "profiles), or give the dataset a size within them")
        ov = ir.load_openvino()
        core = ov.Core()
        model = core.read_model(str(self.model))
        try:
            model.reshape({name: ov.PartialShape(shape) for name, shape in shapes.items()})
            self._load(core, model)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise ShapeError(f"OpenVINO cannot reshape input(s) {sorted(shapes)} of this "
                             f"static IR to {shapes}: {first}",
                             "use `shapes: dynamic` for this target, or remove this size "
                             "from the recipe's `shapes:`") from exc

    def _load(self, core: Any, model: Any) -> None:
        compiled = core.compile_model(model, self.device, self.config)
        requested = str(self.config.get("INFERENCE_PRECISION_HINT", "default"))
        facts = ir.precision_facts(core, compiled, self.device, requested)
        self.precision = str(facts["label"])
        self.fallback = (f"precision {self.precision}"
                         if not facts["honoured"] or requested == "default" else None)
        self._compiled = compiled
        self._request = compiled.create_infer_request()
        self._inputs = {
            port.get_any_name(): (
                tuple(d.get_length() if d.is_static else str(d)
                      for d in port.get_partial_shape()),
                str(port.get_element_type().to_dtype()),
            )
            for port in compiled.inputs
        }
        self._share_inputs = all(port.get_partial_shape().is_static for port in compiled.inputs)
        # Outputs in model order: the gates compare the first one. Named as the IR names
        # them (compile gave each exactly its ONNX name): the CPU plugin may merge an
        # output with the tensor before it (an Unsqueeze fused away) and then
        # `get_any_name()` on the compiled port can answer with the internal name.
        self._outputs = [(port, declared.get_any_name())
                         for port, declared in zip(compiled.outputs, model.outputs, strict=True)]

    def _input_metadata(self) -> TensorMeta:
        return self._inputs

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # Outputs are copied (the next call overwrites the request's buffers). Inputs
        # are read in place only when every input shape is static: with a dynamic
        # shape, OpenVINO 2026.4's CPU plugin, once a request has read caller memory
        # in place, can make a later request of the same compiled model return the
        # previous sample's output (docs/backends-openvino.md, "Known issues").
        result = self._request.infer(feeds, share_inputs=self._share_inputs)
        return {name: result[port] for port, name in self._outputs}

    def concurrent(self, feeds: dict[str, np.ndarray], streams: int | None, seconds: float,
                   warmup: float) -> dict[str, Any] | None:
        """`benchmark_app -hint throughput`'s way: the model compiled again with the
        THROUGHPUT hint (the plugin picks its streams, or `streams` of them), and as many
        async requests in flight as it recommends; each request's latency is timed from
        its start to its callback."""
        import time

        import numpy as np

        ov = ir.load_openvino()
        core = ov.Core()
        config = {**self.config, "PERFORMANCE_HINT": "THROUGHPUT"}
        if streams is not None:
            config["NUM_STREAMS"] = streams
        compiled = core.compile_model(core.read_model(str(self.model)), self.device, config)
        jobs = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        queue = ov.AsyncInferQueue(compiled, jobs)
        timed_from = time.perf_counter() + warmup
        stop = timed_from + seconds
        latencies: list[float] = []

        def done(_request: Any, started: float) -> None:
            if started >= timed_from:
                latencies.append((time.perf_counter() - started) * 1e3)

        queue.set_callback(done)
        while (now := time.perf_counter()) < stop:
            queue.start_async(feeds, now)  # waits while every request is busy
        queue.wait_all()
        elapsed = time.perf_counter() - timed_from
        used = int(compiled.get_property("NUM_STREAMS"))
        every = np.asarray(latencies)
        return {"streams": jobs, "fps": float(len(every) / elapsed), "requests": len(every),
                "window_s": round(elapsed, 3),
                "how": f"OpenVINO THROUGHPUT hint: {used} stream(s), {jobs} async request(s)",
                **({"p50": float(np.percentile(every, 50)),
                    "p90": float(np.percentile(every, 90))} if len(every) else {})}

    def profiled(self, feeds: dict[str, np.ndarray], runs: int,
                 warmup: int) -> tuple[list[float], list[Any], list[Any], Any]:
        """`warmup` then `runs` inferences, the first on this compiled model: the wall ms
        of each profiled run, `profiling_info` after the warm-up and after all runs (the
        counters are the mean per run over every run of the compiled model, from any of
        its requests, its first included: backends/openvino/profile.py takes the
        difference), and the runtime model. Needs PERF_COUNT in the runner's config."""
        import time

        self._require_active()
        request = self._request
        for _ in range(warmup):
            request.infer(feeds, share_inputs=self._share_inputs)
        before = list(request.profiling_info)
        walls = []
        for _ in range(runs):
            start = time.perf_counter_ns()
            request.infer(feeds, share_inputs=self._share_inputs)
            walls.append((time.perf_counter_ns() - start) / 1e6)
        return walls, before, list(request.profiling_info), self._compiled.get_runtime_model()

    def _deactivate(self) -> None:
        self._request = None
        self._compiled = None
        self._outputs = []
