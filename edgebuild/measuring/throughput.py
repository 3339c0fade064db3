"""measure-throughput: inferences per second with several requests in flight.

Latency is one request at a time; a camera pipeline or a server keeps several in
flight, and what a target sustains then is its throughput (frames per second). Each
runtime has its own way to run concurrent requests, and the stage uses it:

- OpenVINO: one model compiled with `PERFORMANCE_HINT: THROUGHPUT` (the plugin picks
  its streams) and an `AsyncInferQueue` of as many requests as it recommends
  (`OPTIMAL_NUMBER_OF_INFER_REQUESTS`) — what `benchmark_app -hint throughput` does;
- every other runtime (ONNX Runtime sessions, TFLite interpreters): `streams`
  runners, each with its share of the target's threads (`measure.threads // streams`,
  at least 1), each driven by its own Python thread (the runtimes release the GIL).

After a warm-up, requests run for `seconds`; FPS is the requests completed over the
time they took, and each request's latency under that load is kept (p50, p90). The
CPU share other processes took meanwhile is measured as for latency: a figure timed
on a busy machine is marked (never cached), and a `min_fps` it misses is undecided,
not failed — others' load can only lower the figure, so a pass under load stands.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.generated import sample_inputs
from edgebuild.core.op import OpResult, StageContext
from edgebuild.gates import noisy
from edgebuild.measure.conditions import conditions
from edgebuild.measure.record import Conditions, Throughput
from edgebuild.measuring.base import TargetOp

if TYPE_CHECKING:
    from edgebuild.backends.base import Backend

WARMUP_S = 0.5  # concurrent requests before timing, discarded (threads, caches, JIT)


class ThroughputParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    streams: int | None = Field(None, ge=1, le=64)  # None: the runtime's recommendation
    seconds: float = Field(3.0, gt=0, le=600)


class MeasureThroughput(TargetOp):
    name = "measure-throughput"
    version = 1
    Params = ThroughputParams
    produces = "throughput"
    summary = "time the compiled artifact with several requests in flight (FPS)"

    def _run(self, ctx: StageContext, backend: Backend, params: Any) -> OpResult:
        from edgebuild.measure.conditions import CpuMeter

        p: ThroughputParams = params
        assert ctx.target is not None
        if ctx.io.state:
            return OpResult(main="", format=self.produces, unmeasurable=(
                "not measurable here: a stream's steps depend on each other (`state:`), so "
                "concurrent requests of one stream are not what a deployment runs"))
        settings = ctx.target.measure
        threads = settings.threads or 1
        (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1)
        before = conditions(settings.threads)
        meter = CpuMeter.start()
        with ExitStack() as stack:
            first = stack.enter_context(backend.runner(ctx.input(), ctx.target, threads))
            where = first.label(backend.where(ctx.target, "latency"))
            own = first.concurrent(feeds, p.streams, p.seconds, WARMUP_S)
            if own is not None:
                figures = own
            else:
                stack.close()  # each stream gets its own runner and its share of threads
                streams = p.streams or threads
                each = max(1, threads // streams)
                runners = [stack.enter_context(backend.runner(ctx.input(), ctx.target, each))
                           for _ in range(streams)]
                figures = drive([_bound(r, feeds) for r in runners], p.seconds, WARMUP_S)
                figures.update(threads_per_stream=each, how=(
                    f"{streams} runner(s) of {each} thread(s), each in its own thread"))
        busy = meter.others_share() if meter is not None else None
        after = conditions(settings.threads)
        measured = Conditions.model_validate({
            **before, "load_average_after": after["load_average"], "others_busy_share": busy,
            "settings": settings.model_dump()})
        record = Throughput.model_validate({**figures, "conditions": measured,
                                            **({"where": where} if where else {})})
        limit = settings.max_busy_share
        if limit is not None and busy is not None and busy > limit:
            measured.busy = (f"other processes used {busy:.0%} of the CPU while timing "
                             f"(limit {limit:.0%}, measure.max_busy_share)")
        # As for latency, whatever the settings: a figure others took the CPU from is
        # judged by its gate, never cached (gates/noisy.py).
        untrusted = noisy.untrusted(measured.as_dict())
        if untrusted:
            record.untrusted = f"not cached: {untrusted}"
        data = record.to_json()
        (ctx.out / "throughput.json").write_text(json.dumps(data, indent=1))
        return OpResult(main="throughput.json", format=self.produces, metadata=data)


def _bound(runner: Any, feeds: dict[str, Any]) -> Callable[[], object]:
    return lambda: runner.infer(feeds)


def drive(calls: list[Callable[[], object]], seconds: float,
          warmup: float = WARMUP_S) -> dict[str, Any]:
    """Run each call in its own thread, back to back, for `warmup` then `seconds`: the
    requests completed in the timed window, its length, and their latencies."""
    import numpy as np

    latencies: list[list[float]] = [[] for _ in calls]
    errors: list[BaseException] = []
    start = threading.Event()
    clock: dict[str, float] = {}

    def loop(index: int, call: Callable[[], object]) -> None:
        start.wait()
        try:
            while time.perf_counter() < clock["measure"]:
                call()  # warm-up, discarded
            while (t0 := time.perf_counter()) < clock["stop"]:
                call()
                latencies[index].append((time.perf_counter() - t0) * 1e3)
        except BaseException as exc:  # re-raised in the stage's thread below
            errors.append(exc)

    workers = [threading.Thread(target=loop, args=(i, c), daemon=True)
               for i, c in enumerate(calls)]
    for worker in workers:
        worker.start()
    clock["measure"] = time.perf_counter() + warmup
    clock["stop"] = clock["measure"] + seconds
    start.set()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    ended = time.perf_counter()  # the last request started before `stop` has finished
    every = np.concatenate([np.asarray(x) for x in latencies]) if calls else np.zeros(0)
    elapsed = ended - clock["measure"]
    return {"streams": len(calls), "fps": float(len(every) / elapsed) if elapsed > 0 else 0.0,
            "requests": len(every), "window_s": round(elapsed, 3),
            **({"p50": float(np.percentile(every, 50)),
                "p90": float(np.percentile(every, 90))} if len(every) else {})}
