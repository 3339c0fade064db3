"""Stages on a real Dask cluster (loopback only): same results as a local run, device
stages on the worker that holds the device, a clear verdict when none does."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import cached_rerun, edgebuild, retimed

pytest.importorskip("distributed", reason="--cluster needs Dask distributed "
                    "(extra: distributed)")
pytestmark = pytest.mark.distributed

BOARD = """\
name: fake-board
description: A board reached through a Dask worker tagged fake-board (this machine here).
backend: onnxruntime
device: {kind: cpu, arch: x86_64, name: loopback stand-in for a device}
options: {graph_optimization_level: basic}
runs_on: {kind: dask, resource: fake-board}
measure: {warmup_iterations: 1, min_iterations: 20, min_seconds: 0.2, max_busy_share: null}
"""


def report(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_local_cluster_builds_what_a_local_run_builds(tiny_project: Callable[..., Path],
                                                      tmp_path: Path) -> None:
    recipe = tiny_project()
    env_cache = os.environ["EDGEBUILD_CACHE_DIR"]
    local = edgebuild("run", str(recipe), "--out", str(tmp_path / "local"),
                      "--cache-dir", str(tmp_path / "cache-local"))
    assert local.returncode == 0, local.stderr
    clustered = edgebuild("run", str(recipe), "--cluster", "local:2", "--out",
                          str(tmp_path / "cluster"), "--cache-dir", env_cache)
    assert clustered.returncode == 0, clustered.stderr
    by_local = {s["id"]: s for s in report(tmp_path / "local")["stages"]}
    by_cluster = {s["id"]: s for s in report(tmp_path / "cluster")["stages"]}
    assert by_cluster.keys() == by_local.keys()
    for sid, stage in by_cluster.items():
        assert stage["key"] == by_local[sid]["key"], sid  # same keys on either executor
        assert stage["worker"].startswith("tls://127.0.0.1:"), sid  # TLS, loopback
        if stage["op"] not in ("measure-latency",):  # timings differ; everything else not
            assert stage["artifact_digest"] == by_local[sid]["artifact_digest"], sid
    verdicts = {(g["target"], g["gate"], g["status"])
                for t in report(tmp_path / "cluster")["targets"] for g in t["gates"]}
    assert verdicts == {(g["target"], g["gate"], g["status"])
                        for t in report(tmp_path / "local")["targets"] for g in t["gates"]}
    busy = retimed(tmp_path / "cluster")
    again = edgebuild("run", str(recipe), "--cluster", "local:2", "--out",
                      str(tmp_path / "cluster"), "--cache-dir", env_cache)
    assert again.returncode == 0 and cached_rerun(busy) in again.stdout


def start_worker(address: str, cwd: Path, *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "edgebuild", "worker", address, *extra],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # wait until it has joined
        if "joined" in line:
            return proc
    raise AssertionError(f"worker did not join: exit {proc.wait()}")


def board_project(tiny_project: Callable[..., Path]) -> Path:
    recipe = tiny_project()
    (recipe.parent / "targets").mkdir()
    (recipe.parent / "targets" / "fake-board.yaml").write_text(BOARD)
    text = recipe.read_text().replace("targets:\n  host-cpu:", "targets:\n  fake-board:")
    recipe.write_text(text.replace(
        "    measure: {warmup_iterations: 1, min_iterations: 5, max_busy_share: null, "
        "min_seconds: 0}\n", ""))
    return recipe


@pytest.mark.slow
def test_device_stages_run_on_the_tagged_worker(tiny_project: Callable[..., Path],
                                                tmp_path: Path, scheduler: str) -> None:
    recipe = board_project(tiny_project)
    device = start_worker(scheduler, recipe.parent, "--target", "fake-board", "--name", "board")
    plain = start_worker(scheduler, recipe.parent, "--name", "builder")
    try:
        result = edgebuild("run", str(recipe), "--cluster", scheduler, "--out",
                           str(tmp_path / "out"), cwd=recipe.parent)
        assert result.returncode == 0, result.stdout + result.stderr
        stages = report(tmp_path / "out")["stages"]
        measuring = [s for s in stages if s["op"] in ("infer", "measure-latency")]
        workers = {s["worker"] for s in measuring}
        assert len(workers) == 1  # every device stage on the one worker holding the tag
        info = subprocess.run(
            [sys.executable, "-c", "import sys, distributed; c = distributed.Client(sys.argv[1]);"
             "print({w['name']: a for a, w in c.scheduler_info(n_workers=-1)['workers'].items()})",
             scheduler], capture_output=True, text=True, check=True)
        assert workers == {eval(info.stdout)["board"]}
        spans = sorted((s["started"], s["finished"]) for s in measuring)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end  # measurements on the device never overlap
    finally:
        for proc in (device, plain):
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_no_worker_with_the_resource_is_not_measurable(tiny_project: Callable[..., Path],
                                                        tmp_path: Path, scheduler: str) -> None:
    recipe = board_project(tiny_project)
    plain = start_worker(scheduler, recipe.parent, "--name", "builder")
    try:
        started = time.monotonic()
        result = edgebuild("run", str(recipe), "--cluster", scheduler, "--resource-timeout",
                           "3", "--keep-going", "--out", str(tmp_path / "out"),
                           cwd=recipe.parent)
        assert time.monotonic() - started < 120
        assert result.returncode == 1, result.stdout + result.stderr  # policy: fail
        assert "no worker with resource 'fake-board' joined scheduler" in result.stdout
        assert "Traceback" not in result.stdout + result.stderr
    finally:
        plain.kill()
        plain.wait()


def test_worker_refuses_a_profile_that_is_not_a_device(tmp_path: Path) -> None:
    result = edgebuild("worker", "tcp://127.0.0.1:1", "--target", "host-cpu")
    assert result.returncode == 2
    assert "does not run on a Dask worker" in result.stderr


def children(pid: int) -> list[int]:
    """Direct child processes of `pid` (Linux /proc)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


@pytest.mark.slow
def test_a_worker_killed_mid_stage_loses_nothing(tiny_project: Callable[..., Path],
                                                 tmp_path: Path, scheduler: str) -> None:
    """The stage's worker dies mid-measurement: Dask runs the task again elsewhere (or the
    stage fails cleanly), and nothing half-written reaches the store."""
    import signal

    from edgebuild.cache.store import Store

    recipe = tiny_project()
    # 10 s of timing whatever the CPU (the tiny model reaches the default 100,000-run cap
    # in under 2 s on a fast one): the worker is killed 3 s into it, and the second worker
    # times it whole again.
    recipe.write_text(recipe.read_text().replace(
        "min_seconds: 0}", "min_seconds: 10, max_iterations: 100000000}"))
    first = start_worker(scheduler, recipe.parent, "--name", "first")
    second = None
    cache = tmp_path / "cache"
    run = subprocess.Popen(
        [sys.executable, "-m", "edgebuild", "run", str(recipe), "--cluster", scheduler,
         "--out", str(tmp_path / "out"), "--cache-dir", str(cache)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The quick stages come and go; the 10 s measurement is the stage process that
        # stays: kill its Dask worker once one has lived for 3 s.
        seen: dict[int, float] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            now = time.monotonic()
            for pid in children(first.pid):
                seen.setdefault(pid, now)
            if any(now - since > 3 and pid in children(first.pid)
                   for pid, since in seen.items()):
                break
            time.sleep(0.2)
        else:
            run.kill()
            out, err = run.communicate()
            raise AssertionError(f"the measurement never started on the first worker:\n"
                                 f"{out}\n{err}")
        second = start_worker(scheduler, recipe.parent, "--name", "second")
        first.send_signal(signal.SIGKILL)
        first.wait()
        out, err = run.communicate(timeout=300)
    finally:
        for proc in (first, second, run):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert run.returncode in (0, 3), out + err
    assert "Traceback" not in out + err
    store = Store(cache)
    for key in store.entry_keys():  # every entry whole and verified
        assert store.lookup(key) is not None, key


def hidden_worker(address: str, hide: list[Path], *extra: str) -> subprocess.Popen[str]:
    """A worker that cannot see `hide` (empty tmpfs mounted over each, in its own mount
    namespace): as on another machine, it can only use what the task carries."""
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"needs `unshare -m` (root) to hide folders from a worker: "
                    f"{probe.stderr.decode().strip()}")
    mounts = " && ".join(f"mount -t tmpfs none '{folder}'" for folder in hide)
    command = (f"{mounts} && exec '{sys.executable}' -m edgebuild worker {address} "
               + " ".join(extra))
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", command], cwd="/",
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "joined" in line:
            return proc
    raise AssertionError(f"worker did not join: exit {proc.wait()}")


@pytest.mark.slow
def test_a_worker_that_cannot_see_the_clients_files_builds_the_same(
        tiny_project: Callable[..., Path], tmp_path: Path, scheduler: str) -> None:
    """Datasets and the model source travel by content: the worker sees none of the
    client's project folder, yet builds the same digests and verdicts."""
    recipe = tiny_project()
    local = edgebuild("run", str(recipe), "--out", str(tmp_path / "local"),
                      "--cache-dir", str(tmp_path / "cache-local"))
    assert local.returncode == 0, local.stderr
    worker = hidden_worker(scheduler, [recipe.parent], "--name", "elsewhere")
    try:
        result = edgebuild("run", str(recipe), "--cluster", scheduler, "--out",
                           str(tmp_path / "remote"), "--cache-dir", str(tmp_path / "cache"))
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        worker.kill()
        worker.wait()
    by_local = {s["id"]: s for s in report(tmp_path / "local")["stages"]}
    for stage in report(tmp_path / "remote")["stages"]:
        assert stage["worker"], stage["id"]
        if stage["op"] != "measure-latency":
            assert stage["artifact_digest"] == by_local[stage["id"]]["artifact_digest"]
