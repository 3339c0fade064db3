"""DaskExecutor: stage tasks on a Dask cluster, device stages on the tagged workers.

The second implementation of the executor seam (executor.py). The scheduler still
decides what is ready; this executor ships each task to a Dask worker through the
remote sequence (remote/transport.py `ship`, over remote/dask.py's DaskTransport):

    client ── spec + input files (bytes) ──▶ worker: run_remote (remote/far_side.py)
           ◀── result + output files ───────┘   (its own worker process per stage)

A task for a device (`runs_on: {kind: dask, resource: jetson-orin}`) asks Dask for
that resource; a worker started with `edgebuild worker ... --target` holds it with
capacity 1, so measurements on one device never overlap. Dask waits forever for a
resource no worker has, so the executor waits at most `resource_timeout_s` for
such a worker to join, then reports the stage as not measurable here.

A build never hangs on a task either. The worker kills a stage still running after
`stage_timeout_s` (--stage-timeout), and `run_remote` turns any failure of its own
into a plain error reply; and the client waits for a reply at most that long plus
`reply_grace_s`, for the failures no reply ever comes back from (an exception Dask
cannot pickle used to leave `future.result()` waiting forever):

    submit ── stage_timeout_s: the worker kills the stage ── + reply_grace_s: the
              client stops waiting, fails the stage naming the worker, goes on

The cluster is started (or connected to) on the first task: a fully cached run
starts nothing.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core.stage_result import StageResult
from edgebuild.errors import EdgebuildError
from edgebuild.execute.logs import one_line, quiet_dask
from edgebuild.execute.remote.dask import DaskTransport
from edgebuild.execute.security import (
    LOOPBACK_HTTP,
    NO_HTTP_ROUTES,
    TlsFiles,
    check_address,
    client_security,
    close_http,
    worker_security,
)
from edgebuild.execute.task import StageTask, TaskOutcome

CLUSTER_ENV = "EDGEBUILD_CLUSTER"
_LOCAL = re.compile(r"^local(?::(\d+))?$")


@dataclass(frozen=True)
class ClusterSpec:
    """`local[:N]` (a loopback cluster of N worker processes) or a scheduler address,
    and how to talk to it (security.py): this machine's TLS files, or `insecure` for
    plain tcp:// to another machine."""

    address: str | None  # tls://host:port; None: start a local cluster
    workers: int = 2
    tls: TlsFiles | None = None
    insecure: bool = False

    @classmethod
    def parse(cls, text: str, tls: TlsFiles | None = None, insecure: bool = False
              ) -> ClusterSpec:
        """The spec, or a usage error (refused before anything connects)."""
        local = _LOCAL.match(text)
        if local:
            workers = int(local.group(1) or 2)
            if not 1 <= workers <= 64:
                raise EdgebuildError(f"--cluster {text}: between 1 and 64 local workers")
            return cls(None, workers)
        if re.match(r"^(tcp|tls|ucx)://[^\s/]+:\d+$", text):
            check_address(text, tls, insecure)
            return cls(text, tls=tls, insecure=insecure)
        raise EdgebuildError(f"--cluster {text!r}: not a cluster",
                             "use local, local:N or a scheduler address tls://HOST:PORT "
                             f"(also ${CLUSTER_ENV})")

    def __str__(self) -> str:
        return self.address or f"local:{self.workers}"


STAGE_TIMEOUT_S = 6 * 3600.0  # --stage-timeout's default: no stage of ours takes hours
REPLY_GRACE_S = 300.0  # beyond the stage's own timeout: queueing and sending outputs


class DaskExecutor:
    def __init__(self, spec: ClusterSpec, resource_timeout_s: float = 60.0,
                 stage_timeout_s: float = STAGE_TIMEOUT_S,
                 reply_grace_s: float = REPLY_GRACE_S) -> None:
        self.spec = spec
        self.resource_timeout_s = resource_timeout_s
        self._client: Any = None
        self._cluster: Any = None
        self._threads: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        self._transport = DaskTransport(self._connect, stage_timeout_s, reply_grace_s)
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
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise EdgebuildError("--cluster needs Dask distributed",
                                 "pip install 'edgebuild[distributed]'") from None
        try:
            if self.spec.address is None:
                from edgebuild.execute.taskdirs import remove_stale

                remove_stale()
                # Loopback only, TLS with a certificate made for this run (kept in memory:
                # no other process can join), and no HTTP server at all.
                with dask.config.set(NO_HTTP_ROUTES):
                    self._cluster = LocalCluster(
                        n_workers=self.spec.workers, threads_per_worker=1, processes=True,
                        host="127.0.0.1", dashboard_address=None, security=True,
                        scheduler_kwargs=LOOPBACK_HTTP)
                client = Client(self._cluster)
                close_http(self._cluster, client)
                return client
            return Client(self.spec.address, timeout=30,
                          security=client_security(self.spec.address, self.spec.tls))
        except ImportError as exc:  # security=True needs `cryptography`
            raise EdgebuildError(f"--cluster {self.spec}: {exc}",
                                 "pip install 'edgebuild[distributed]'") from None
        except (OSError, TimeoutError) as exc:
            raise EdgebuildError(f"cannot reach the Dask scheduler {self.spec}: "
                                 f"{one_line(exc)}",
                                 "is `dask scheduler` running there, the port open, and "
                                 "this machine's certificate signed by the cluster's CA?"
                                 ) from None

    @property
    def scheduler_address(self) -> str:
        """The address of the scheduler this run uses (connects first)."""
        return str(self._connect().scheduler.address)

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

    def _run(self, task: StageTask) -> TaskOutcome:
        from edgebuild.execute.remote.transport import ship

        self._connect()
        started = time.time()
        if task.resource is not None:
            missing = self._wait_for_resource(task.resource)
            if missing:
                return TaskOutcome(StageResult.unmeasurable(missing), started, time.time())
        return ship(task, self._transport, self._digests, started)

    def shutdown(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
        self._transport.forget()  # releases the run's data on the cluster
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            close_local_cluster(self._cluster)
            from edgebuild.execute.taskdirs import remove_stale

            remove_stale()  # the folders of local workers killed during the run


CLOSE_TIMEOUT_S = 60.0


def close_local_cluster(cluster: Any) -> None:
    """Close a LocalCluster whose workers may have died during the run.

    After a nanny restarts a killed worker, the scheduler can announce the new worker's
    removal before the cluster's periodic copy of the scheduler's state has seen it;
    `SpecCluster._update_worker_status` then raises KeyError while closing
    (dask/distributed#5407, still in 2026.8). By then the scheduler and every worker are
    closed (SpecCluster._close awaits them before the watcher), so the run has lost
    nothing and must not end on a traceback.

    A close that does not end within CLOSE_TIMEOUT_S (a nanny that never answers) is
    given up with a warning rather than waited for without end: the run's results are
    written by then.
    """
    try:
        cluster.close(timeout=CLOSE_TIMEOUT_S)
    except KeyError as exc:
        logging.getLogger(__name__).debug(
            "LocalCluster.close: worker %s was removed before the cluster saw it "
            "(dask/distributed#5407)", exc)
    except TimeoutError:
        logging.getLogger(__name__).warning(
            "the local Dask cluster did not close within %g s: not waiting for it "
            "any longer", CLOSE_TIMEOUT_S)


def serve_worker(address: str, profile: Any | None, name: str | None = None,
                 nthreads: int = 1, tls: TlsFiles | None = None,
                 insecure: bool = False) -> None:
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

    check_address(address, tls, insecure)
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

    import dask

    from edgebuild.execute.taskdirs import remove_stale

    remove_stale()

    async def serve() -> None:
        with dask.config.set(NO_HTTP_ROUTES):
            worker = Worker(address, nthreads=nthreads, resources=resources or None,
                            name=name, security=worker_security(address, tls))
        async with worker:
            if getattr(worker, "http_server", None) is not None:
                worker.http_server.stop()
            print(f"edgebuild worker: {worker.address} joined {address} "
                  f"with resources {resources or 'none'}", flush=True)
            await worker.finished()

    try:
        asyncio.run(serve())
    except (OSError, TimeoutError) as exc:
        raise EdgebuildError(f"cannot join the Dask scheduler {address}: {one_line(exc)}",
                             "is it running, the port open, and this machine's certificate "
                             "signed by the cluster's CA?") from None
