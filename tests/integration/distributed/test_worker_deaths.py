"""Workers killed mid-stage (issue 27.7): the stage runs again on a live worker with its
inputs sent again, the run says so in one line, and no task folder outlives its task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="--cluster needs Dask distributed "
                    "(extra: distributed)")
pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def dask_workers(run_pid: int) -> list[int]:
    """The Dask worker processes of a `--cluster local:N` run (spawned by its nannies)."""
    import psutil

    found = []
    for proc in psutil.Process(run_pid).children():
        try:
            if "spawn_main" in " ".join(proc.cmdline()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def stage_processes(worker: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(worker).children()
                if "edgebuild.execute.worker" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def test_killed_workers_stage_runs_again_with_its_inputs_sent_again(
        tiny_project: Callable[..., Path], tmp_path: Path) -> None:
    from edgebuild.cache.store import Store
    from edgebuild.execute.taskdirs import tasks_root

    recipe = tiny_project()
    # A measurement that stays long enough to be killed whatever the CPU.
    recipe.write_text(recipe.read_text().replace(
        "min_seconds: 0}", "min_seconds: 6, max_iterations: 100000000}"))
    root = tasks_root()
    assert root is not None
    cache = tmp_path / "cache"
    run = subprocess.Popen(
        [sys.executable, "-m", "edgebuild", "run", str(recipe), "--cluster", "local:2",
         "--out", str(tmp_path / "out"), "--cache-dir", str(cache)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed: list[int] = []
    try:
        # Wait for a stage process that has lived 2 s (the measurement), then kill every
        # worker at once: the data scattered to them (the model) is lost with them.
        seen: dict[int, float] = {}
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not killed:
            now = time.monotonic()
            workers = dask_workers(run.pid)
            for worker in workers:
                for stage in stage_processes(worker):
                    if now - seen.setdefault(stage, now) > 2:
                        killed = workers
            time.sleep(0.2)
        assert killed, "the measurement never started"
        folders = {f.name for f in root.iterdir()}
        assert any(f.startswith(f"{pid}-") for pid in killed for f in folders)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    text = out + err
    assert run.returncode == 0, text
    assert "Traceback" not in text and "already forgotten" not in text
    logs = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.log"))
    assert "ran again after the Dask task failed" in logs
    store = Store(cache)
    for key in store.entry_keys():  # every entry whole and verified
        assert store.lookup(key) is not None, key
    left = [f.name for f in root.iterdir() if int(f.name.split("-")[0]) in killed]
    assert not left, f"task folders of killed workers outlived them: {left}"


def test_files_sent_while_every_worker_is_dead_wait_for_their_restart(
        tmp_path: Path) -> None:
    """The CI failure of stop 34: the retry scattered the stage's files while the nannies
    were still restarting the killed workers, and the stage failed with "cannot send the
    stage's files to the cluster: … Stream is closed"."""
    from edgebuild.core.digest import digest_file
    from edgebuild.execute.cluster import ClusterSpec, DaskExecutor
    from edgebuild.execute.task import StageTask

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.onnx").write_bytes(os.urandom(4096))  # new content: scattered anew
    spec = {"stage_id": "no-such-stage", "recipe_dir": str(tmp_path), "datasets": {},
            "inputs": {"model": {"path": str(model),
                                 "files": {"model.onnx": digest_file(model / "model.onnx")}}},
            "out": str(tmp_path / "out"), "source": None}
    executor = DaskExecutor(ClusterSpec.parse("local:2"))
    try:
        executor._connect()
        workers = dask_workers(os.getpid())
        assert workers, "no Dask worker process found"
        for pid in workers:  # and send at once: the scheduler still counts them
            os.kill(pid, signal.SIGKILL)
        outcome = executor.submit(StageTask("no-such-stage", spec, tmp_path / "x.log")).result(
            timeout=300)
    finally:
        executor.shutdown()
    message = outcome.result.message
    # The files reached a restarted worker, which ran the task (and refused the unknown
    # stage): neither the send nor the Dask task failed.
    assert not message.startswith("cannot send"), message
    assert not message.startswith("the Dask task failed"), message
    assert outcome.extra.get("worker"), outcome


def test_closing_after_a_restarted_worker_left_unseen_ends_without_a_traceback() -> None:
    """The CI failure of stop 36: after the nannies restarted killed workers, the scheduler
    announced a restarted worker's removal before the cluster's copy of the scheduler's
    state had seen it, and `LocalCluster.close` raised KeyError from Dask's watcher
    (dask/distributed#5407). Emptying that copy reproduces the race without timing."""
    from distributed import LocalCluster

    from edgebuild.execute.cluster import close_local_cluster

    cluster = LocalCluster(n_workers=1, processes=False, dashboard_address=None)
    scheduler = cluster.scheduler
    cluster.scheduler_info["workers"].clear()  # the copy has not seen the worker yet
    with pytest.raises(KeyError):  # Dask's own behaviour, so the test checks the real race
        cluster._update_worker_status("remove", "inproc://never-seen")
    close_local_cluster(cluster)
    assert scheduler is not None and scheduler.status.name == "closed"
    assert not scheduler.workers
