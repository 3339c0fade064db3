"""DaskTransport: a stage's files and task to a Dask worker, its reply back.

The `RemoteTransport` behind `DaskExecutor` (execute/cluster.py, which owns the
connection and decides when a task may go); `transport.ship` runs the sequence:

    send  each file's bytes scattered once per run, keyed by content
    run   far_side.run_remote on a worker (on the device's, for a resource), the
          reply awaited at most the stage's timeout + a grace, then checked (returned.py)

A worker that dies or loses its connection is `Lost`: its scattered copies are
forgotten, and the step runs again once a worker is back (`recover`). A reply that
never comes is the stage's error, naming the worker that ran it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgebuild.core.stage_result import StageResult
from edgebuild.execute.logs import one_line
from edgebuild.execute.remote import far_side
from edgebuild.execute.remote.carry import Carried
from edgebuild.execute.remote.far_side import Files, Sources
from edgebuild.execute.remote.returned import Reply, check_reply
from edgebuild.execute.remote.transport import Lost
from edgebuild.execute.task import StageTask

WORKER_RETURN_S = 60.0  # how long a retry waits for a worker after all of them died
LOST = "workers died or lost their connection; the stage's outputs were not kept"


class DaskTransport:
    where = "the cluster"
    attempt = "the Dask task"

    def __init__(self, connect: Callable[[], Any], stage_timeout_s: float,
                 reply_grace_s: float) -> None:
        self._connect = connect  # the executor's client, connected on first use
        self.stage_timeout_s = stage_timeout_s
        self.reply_grace_s = reply_grace_s
        self._lock = threading.Lock()
        self._scattered: dict[str, Any] = {}  # file digest -> Dask future of its bytes

    def send(self, sources: Sources) -> Files:
        """Each file's bytes scattered to the cluster once per run, keyed by content:
        a dataset or model file that many stages read crosses the network once per
        worker that needs it (Dask moves it between workers), not once per task."""
        sent: Files = {}
        for dest, (digest, path) in sources.items():
            with self._lock:
                future = self._scattered.get(digest)
            if future is None:
                data = path.read_bytes()
                try:
                    future = self._connect().scatter(data, hash=True)
                except Exception as exc:  # every worker died while it was being sent
                    raise Lost(f"cannot send the stage's files: {type(exc).__name__}: "
                               f"{one_line(exc)}", LOST) from exc
                with self._lock:
                    future = self._scattered.setdefault(digest, future)
            sent[dest] = (digest, future)
        return sent

    def run(self, task: StageTask, carried: Carried, files: Files) -> Reply | StageResult:
        future = self._submit(task, carried, files)
        wait, sent = self.stage_timeout_s + self.reply_grace_s, time.monotonic()
        try:
            raw = future.result(timeout=wait)
        except TimeoutError as exc:
            if time.monotonic() - sent < wait:  # Dask's own timeout: a lost connection
                self._forget_lost(files)
                raise Lost(f"{type(exc).__name__}: {one_line(exc)}", LOST,
                           recover=False) from exc
            return self._no_reply(future, wait)
        except Exception as exc:  # the worker died, or lost its connection
            self._forget_lost(files)
            raise Lost(f"{type(exc).__name__}: {one_line(exc)}", LOST) from exc
        who = raw.get("worker") if isinstance(raw, dict) else None
        who = who if isinstance(who, str) and who else "?"
        return check_reply(raw, Path(task.spec["out"]), one_line(who)[:80])

    def recover(self) -> bool:
        """Whether a worker is there to take the retry: a nanny restarts a killed one
        within seconds; a client that lost its scheduler cannot retry at all."""
        client = self._connect()
        if client.status != "running":
            return False
        try:
            client.wait_for_workers(1, timeout=WORKER_RETURN_S)
        except Exception:  # none came back (Dask's TimeoutError), or the client broke
            return False
        return True

    def forget(self) -> None:
        """Release the run's data on the cluster."""
        with self._lock:
            self._scattered.clear()

    def _forget_lost(self, files: Files) -> None:
        """Drop the scattered copies a dead worker took with it, so the retry sends them
        again (Dask forgets data whose only holder died: "already forgotten")."""
        with self._lock:
            for digest, future in files.values():
                lost = getattr(future, "status", "finished") != "finished"
                if lost and self._scattered.get(digest) is future:
                    del self._scattered[digest]

    def _submit(self, task: StageTask, carried: Carried, files: Files) -> Any:
        resources = {task.resource: 1} if task.resource else None
        # far_side.run_remote is looked up now: Dask sends it by reference.
        return self._connect().submit(
            far_side.run_remote, carried.spec, files,
            [task.resource] if task.resource else [], carried.expect_modules,
            self.stage_timeout_s, resources=resources, pure=False,
            key=f"edgebuild-{re.sub(r'[^A-Za-z0-9_.@-]', '_', task.stage_id)}-"
                f"{uuid.uuid4().hex[:8]}")

    def _no_reply(self, future: Any, wait: float) -> StageResult:
        """The stage failed: no reply came within `wait` seconds. The task is let go (a
        task stuck on a worker ends when the worker kills its stage)."""
        who = self._who_ran(str(future.key))
        try:
            future.cancel()
        except Exception:  # the client may be broken by now
            logging.getLogger(__name__).debug("cannot cancel %s", future.key)
        return StageResult.error(
            f"no reply from worker {who} within {wait:g} s: the task is stuck, or failed in "
            "a way Dask could not send back", "a stage that is only slow needs a larger "
            "--stage-timeout; the worker's log says what happened (docs/distributed.md)")

    def _who_ran(self, key: str) -> str:
        """The worker that announced it runs task `key` (far_side.announce), or one the
        scheduler says is running it, or '?'. A worker's word: one line, cut short."""
        try:
            client = self._connect()
            for _, event in reversed(client.get_events(far_side.TASK_EVENT)):
                if isinstance(event, dict) and event.get("key") == key:
                    return one_line(event.get("worker"))[:80] or "?"
            for worker, keys in client.processing().items():
                if key in keys:
                    return one_line(worker)[:80]
        except Exception:  # naming the worker is a courtesy
            return "?"
        return "?"
