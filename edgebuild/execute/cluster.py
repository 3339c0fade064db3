"""DaskExecutor: stage tasks on a Dask cluster, device stages on the tagged workers.

The second implementation of the executor seam (executor.py). The scheduler still
decides what is ready; this executor ships each task to a Dask worker:

    client ── spec + input files (bytes) ──▶ worker: run_remote (remote.py)
           ◀── result + output files ───────┘   (its own worker process per stage)

A task for a device (`runs_on: {kind: dask, resource: jetson-orin}`) asks Dask for
that resource; a worker started with `edgebuild worker ... --target` holds it with
capacity 1, so measurements on one device never overlap. Dask waits forever for a
resource no worker has, so the executor waits at most `resource_timeout_s` for
such a worker to join, then reports the stage as not measurable here.

The cluster is started (or connected to) on the first task: a fully cached run
starts nothing.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.errors import EdgebuildError
from edgebuild.execute.remote import Files
from edgebuild.execute.task import StageTask, TaskOutcome

CLUSTER_ENV = "EDGEBUILD_CLUSTER"
_LOCAL = re.compile(r"^local(?::(\d+))?$")


@dataclass(frozen=True)
class ClusterSpec:
    """`local[:N]` (a loopback cluster of N worker processes) or a scheduler address."""

    address: str | None  # tcp://host:port; None: start a local cluster
    workers: int = 2

    @classmethod
    def parse(cls, text: str) -> ClusterSpec:
        local = _LOCAL.match(text)
        if local:
            workers = int(local.group(1) or 2)
            if not 1 <= workers <= 64:
                raise EdgebuildError(f"--cluster {text}: between 1 and 64 local workers")
            return cls(None, workers)
        if re.match(r"^(tcp|tls|ucx)://[^\s/]+:\d+$", text):
            return cls(text)
        raise EdgebuildError(f"--cluster {text!r}: not a cluster",
                             "use local, local:N or a scheduler address tcp://HOST:PORT "
                             f"(also ${CLUSTER_ENV})")

    def __str__(self) -> str:
        return self.address or f"local:{self.workers}"


def quiet_dask() -> None:
    """Dask logs every worker's life at INFO; a build log wants only problems."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    logging.getLogger("distributed").setLevel(logging.WARNING)


class DaskExecutor:
    def __init__(self, spec: ClusterSpec, resource_timeout_s: float = 60.0) -> None:
        self.spec = spec
        self.resource_timeout_s = resource_timeout_s
        self._client: Any = None
        self._cluster: Any = None
        self._threads: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        self._scattered: dict[str, Any] = {}  # file digest -> Dask future of its bytes
        self._digests: dict[Path, str] = {}  # client file -> digest, hashed once per run

    # -- connection (lazy) ---------------------------------------------------

    def _connect(self) -> Any:
        with self._lock:  # stage threads call this at once: one client, one cluster
            if self._client is None:
                self._client = self._start()
            return self._client

    def _start(self) -> Any:
        quiet_dask()
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise EdgebuildError("--cluster needs Dask distributed",
                                 "pip install 'edgebuild[distributed]'") from None
        try:
            if self.spec.address is None:
                # Loopback only: bound to 127.0.0.1, never the machine's external address.
                self._cluster = LocalCluster(n_workers=self.spec.workers, threads_per_worker=1,
                                             processes=True, host="127.0.0.1",
                                             dashboard_address=None)
                return Client(self._cluster)
            return Client(self.spec.address, timeout=30)
        except (OSError, TimeoutError) as exc:
            raise EdgebuildError(f"cannot reach the Dask scheduler {self.spec}: {exc}",
                                 "is `dask scheduler` running there, and the port open?"
                                 ) from None

    def _workers(self) -> dict[str, Any]:
        info: dict[str, Any] = self._connect().scheduler_info(n_workers=-1)
        return dict(info.get("workers", {}))

    @property
    def slots(self) -> int:
        """Worker threads in the cluster now (a local spec needs no connection)."""
        if self.spec.address is None:
            return self.spec.workers
        return max(1, sum(int(w.get("nthreads", 1)) for w in self._workers().values()))

    # -- running -------------------------------------------------------------

    def submit(self, task: StageTask) -> Future[TaskOutcome]:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(thread_name_prefix="edgebuild-dask")
        return self._threads.submit(self._run, task)

    def _wait_for_resource(self, resource: str) -> str:
        """'' once a worker offers `resource`, else why the stage cannot run."""
        deadline = time.monotonic() + self.resource_timeout_s
        while True:
            if any(resource in (w.get("resources") or {}) for w in self._workers().values()):
                return ""
            if time.monotonic() >= deadline:
                return (f"not measurable here: no worker with resource '{resource}' joined "
                        f"scheduler {self.spec} within {self.resource_timeout_s:g} s "
                        f"(start one on the device: edgebuild worker ADDRESS --target ...)")
            time.sleep(0.5)

    def _send(self, files: dict[str, tuple[str, Path]]) -> Files:
        """Each file's bytes scattered to the cluster once per run, keyed by content:
        a dataset or model file that many stages read crosses the network once per
        worker that needs it (Dask moves it between workers), not once per task."""
        sent: Files = {}
        for dest, (digest, path) in files.items():
            with self._lock:
                future = self._scattered.get(digest)
            if future is None:
                future = self._connect().scatter(path.read_bytes(), hash=True)
                with self._lock:
                    future = self._scattered.setdefault(digest, future)
            sent[dest] = (digest, future)
        return sent

    def _run(self, task: StageTask) -> TaskOutcome:
        from edgebuild.execute.carry import carry
        from edgebuild.execute.remote import run_remote, task_files

        client = self._connect()
        started = time.time()
        if task.resource is not None:
            missing = self._wait_for_resource(task.resource)
            if missing:
                return TaskOutcome({"status": "unmeasurable", "reason": missing},
                                   started, time.time())
        try:
            carried = carry(task.spec, self._digests)
            files = self._send(task_files(carried.spec, carried.files))
        except (OSError, EdgebuildError) as exc:
            return TaskOutcome({"status": "error", "message": f"cannot send the stage's files "
                                f"to the cluster: {exc}"}, started, time.time())
        resources = {task.resource: 1} if task.resource else None
        future = client.submit(
            run_remote, carried.spec, files, [task.resource] if task.resource else [],
            carried.expect_modules, resources=resources, pure=False,
            key=f"edgebuild-{re.sub(r'[^A-Za-z0-9_.@-]', '_', task.stage_id)}-"
                f"{uuid.uuid4().hex[:8]}")
        try:
            done: dict[str, Any] = future.result()
        except Exception as exc:  # the worker died, or the task could not be sent
            return TaskOutcome({"status": "error",
                                "message": f"the Dask task failed: {type(exc).__name__}: {exc}",
                                "hint": "a worker died or lost its connection; the stage's "
                                        "outputs were not kept"}, started, time.time())
        task.log.parent.mkdir(parents=True, exist_ok=True)
        task.log.write_text(done["log"])
        out = Path(task.spec["out"])
        for name, data in done["files"].items():
            file = out / name
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(data)
        return TaskOutcome(done["result"], started, time.time(), {"worker": done["worker"]})

    def shutdown(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        self._scattered.clear()  # releases the run's data on the cluster
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def serve_worker(address: str, profile: Any | None, name: str | None = None,
                 nthreads: int = 1) -> None:
    """Join `address` as a Dask worker; with a target profile, as that target's device.

    A device worker holds the profile's resource tag with capacity 1 and runs one
    task at a time (nthreads 1): resources constrain where a task goes but do not
    keep other tasks off the worker, and a conversion running beside a measurement
    would be timed with it. It checks the backend's tools before it joins.
    """
    import asyncio

    from edgebuild.cache.keys import tool_version
    from edgebuild.core.profile import RunnerKind
    from edgebuild.registry import backend_class

    quiet_dask()
    resources: dict[str, float] = {}
    if profile is not None:
        if profile.runs_on.kind is not RunnerKind.DASK:
            raise EdgebuildError(f"target profile '{profile.name}' does not run on a Dask worker "
                                 f"(runs_on.kind: {profile.runs_on.kind.value})",
                                 "set `runs_on: {kind: dask, resource: TAG}` in the profile")
        backend = backend_class(profile.backend)
        versions = {tool: tool_version(tool) for tool in backend.device_tools or backend.tools}
        missing = sorted(t for t, v in versions.items() if v == "not-installed")
        if missing or not backend.implemented:
            raise EdgebuildError(
                f"this machine cannot serve '{profile.name}': backend '{backend.name}' "
                + (f"needs {', '.join(missing)} (tools missing on this worker)" if missing
                   else "is not implemented"),
                backend.install_hint or (f"pip install 'edgebuild[{backend.extra}]'"
                                         if backend.extra else ""))
        resources = {str(profile.runs_on.resource): 1}
        nthreads = 1
        print(f"edgebuild worker: backend {backend.name} ready ("
              + ", ".join(f"{t} {v}" for t, v in versions.items()) + ")", flush=True)
    try:
        from distributed import Worker
    except ImportError:
        raise EdgebuildError("`edgebuild worker` needs Dask distributed",
                             "pip install 'edgebuild[distributed]'") from None

    async def serve() -> None:
        async with Worker(address, nthreads=nthreads, resources=resources or None,
                          name=name) as worker:
            print(f"edgebuild worker: {worker.address} joined {address} "
                  f"with resources {resources or 'none'}", flush=True)
            await worker.finished()

    asyncio.run(serve())
