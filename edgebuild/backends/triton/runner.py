"""Run a built Triton model repository in the bundled server and infer over HTTP.

`activate` starts the server (server.serve) on a free loopback port with the
repository; `infer` sends the recipe's inputs to the served model (`model`, the
artifact as built: the accuracy gate compares it with FP32 as for every target);
`deactivate`, and any exception in between, stops the server.
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.backends.base import Runner, TensorMeta
from edgebuild.errors import StageError

if TYPE_CHECKING:
    import numpy as np

    from edgebuild.backends.triton.server import Server


def served_meta(info: dict[str, Any]) -> TensorMeta:
    """The model's inputs as the Runner checks them: the batch axis dynamic when Triton
    batches (max_batch_size > 0), a -1 dimension dynamic."""
    batched = int(info["max_batch_size"]) > 0
    meta: TensorMeta = {}
    for tensor in info["inputs"]:
        dims: list[int | str] = [d if d > 0 else f"d{i}" for i, d in enumerate(tensor["dims"])]
        meta[tensor["name"]] = (tuple(["batch", *dims] if batched else dims), tensor["dtype"])
    return meta


class TritonRunner(Runner):
    def __init__(self, repository: Path, info: dict[str, Any], threads: int | None) -> None:
        super().__init__()
        self.repository, self.info, self.threads = repository, info, threads
        self._stack = ExitStack()
        self.server: Server | None = None

    def _activate(self) -> None:
        from edgebuild.backends.triton import env, server

        found = env.find_env()
        if isinstance(found, str):
            raise StageError(found)
        self.env = found
        work = Path(self._stack.enter_context(tempfile.TemporaryDirectory(
            prefix="edgebuild-triton-")))
        try:
            self.server = self._stack.enter_context(server.serve(
                self.repository, found, work / "tritonserver.log", self.threads))
        except BaseException:
            self._stack.close()
            raise

    def _input_metadata(self) -> TensorMeta:
        return served_meta(self.info)

    def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from edgebuild.backends.triton import client

        assert self.server is not None
        outputs = [t["name"] for t in self.info["outputs"]]
        return client.infer(self.server.url, self.info["model"], feeds, outputs)

    def concurrent(self, feeds: dict[str, np.ndarray], streams: int | None, seconds: float,
                   warmup: float) -> dict[str, Any] | None:
        """Throughput as a served model's is measured: perf_analyzer at `streams` requests
        in flight (default: the sweep's highest level), against what a client calls (the
        ensemble when there is one)."""
        from edgebuild.backends.triton import perf

        assert self.server is not None
        level = streams or 4
        model = (self.info["ensemble"] or {}).get("name") or self.info["model"]
        with tempfile.TemporaryDirectory(prefix="edgebuild-perf-") as work:
            found = perf.sweep(self.env, self.server.url, model, [level],
                               max(500, int(seconds * 1000 / 3)), Path(work),
                               self.info.get("perf_shapes", []),
                               self.info.get("perf_zeros", False))
        row = found["levels"][0]
        return {"streams": level, "fps": row["fps"], "requests": row["requests"],
                "p50": row["p50"], "p90": row["p90"],
                "how": f"perf_analyzer, concurrency {level}, HTTP, model '{model}'"}

    def _deactivate(self) -> None:
        self.server = None
        self._stack.close()
