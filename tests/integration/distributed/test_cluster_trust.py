"""A cluster only its owner can use, and workers that are not trusted (issue 28.5, 28.6):
a foreign client cannot join a `local:N` run, nothing serves HTTP, and a rogue worker's
reply cannot write a byte outside the stage's own folder."""

from __future__ import annotations

import operator
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytest.importorskip("distributed", reason="--cluster needs Dask distributed "
                    "(extra: distributed)")
pytest.importorskip("cryptography", reason="TLS certificates need cryptography "
                    "(extra: distributed)")
pytestmark = pytest.mark.distributed


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_a_local_cluster_refuses_other_clients_and_serves_no_http() -> None:
    import psutil
    from distributed import Client, Security

    from edgebuild.execute.cluster import ClusterSpec, DaskExecutor

    executor = DaskExecutor(ClusterSpec.parse("local:1"))
    try:
        address = executor.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        foreign = [(address.replace("tls://", "tcp://"), None),  # plain text
                   (address, None),  # TLS without a certificate
                   (address, Security.temporary())]  # a certificate of its own
        for where, security in foreign:
            with pytest.raises(Exception):  # noqa: B017 - Dask raises several kinds
                Client(where, security=security, timeout=10)
        client = executor._client
        assert client.submit(operator.add, 1, 2).result(timeout=60) == 3  # its owner can
        workers = client.scheduler_info(n_workers=-1)["workers"]
        comm = {_port(address)} | {_port(w) for w in workers}
        comm |= {_port(n.address) for n in executor._cluster.workers.values()}  # nannies
        me = psutil.Process()
        listening = {c.laddr.port for p in [me, *me.children(recursive=True)]
                     for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        assert 8787 not in listening
        assert listening <= comm, f"an HTTP server is open: {sorted(listening - comm)}"
    finally:
        executor.shutdown()


ROGUE = '''\
"""Preloaded into a Dask worker: its run_remote runs the stage, then lies in its reply."""
import os

import edgebuild.execute.remote.far_side as remote

honest = getattr(remote, "honest_run_remote", remote.run_remote)  # Dask preloads twice
remote.honest_run_remote = honest


def run_remote(spec, files, resources, expect_modules=None, timeout_s=None):
    done = honest(spec, files, resources, expect_modules, timeout_s)
    mode, target = os.environ["ROGUE_MODE"], os.environ["ROGUE_TARGET"]
    if mode == "absolute":
        done["files"][target] = b"written by a rogue worker"
    elif mode == "dotdot":
        done["files"]["../" * 40 + target.lstrip("/")] = b"written by a rogue worker"
    elif mode == "main":
        done["result"]["main"] = "../" * 40 + target.lstrip("/")
    elif mode == "malformed":
        done["files"] = [(target, b"written by a rogue worker")]
    done["log"] = "ROGUE LOG " + done["log"]
    return done


remote.run_remote = run_remote
'''


@pytest.fixture
def rogue_worker(tmp_path: Path, scheduler: str) -> Iterator[Callable[[str, Path], None]]:
    import subprocess

    procs: list[subprocess.Popen[bytes]] = []

    def start(mode: str, target: Path) -> None:
        preload = tmp_path / "rogue_preload.py"
        preload.write_text(ROGUE)
        env = {**os.environ, "ROGUE_MODE": mode, "ROGUE_TARGET": str(target),
               "DASK_LOGGING__DISTRIBUTED": "info"}  # for "Registered to"
        log = tmp_path / f"rogue-{len(procs)}.log"
        with log.open("w") as handle:  # a file, not a pipe: a full pipe would block it
            proc = subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", scheduler,
                 "--nthreads", "1", "--no-nanny", "--no-dashboard", "--preload", str(preload)],
                env=env, cwd=tmp_path, stdout=handle, stderr=subprocess.STDOUT)
        procs.append(proc)
        while "Registered to" not in log.read_text():
            assert proc.poll() is None, f"the rogue worker did not join:\n{log.read_text()}"
            time.sleep(0.2)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["absolute", "dotdot", "main", "malformed"])
def test_a_rogue_workers_reply_writes_nothing(mode: str, tiny_project: Callable[..., Path],
                                              tmp_path: Path, scheduler: str,
                                              rogue_worker: Callable[[str, Path], None]
                                              ) -> None:
    from edgebuild.cache.store import Store

    recipe = tiny_project()
    marker = f"rogue-{uuid.uuid4().hex}"
    target = tmp_path / "outside" / marker
    rogue_worker(mode, target)
    cache = tmp_path / "cache"
    result = edgebuild("run", str(recipe), "--cluster", scheduler, "--out",
                       str(tmp_path / "out"), "--cache-dir", str(cache))
    text = result.stdout + result.stderr
    assert result.returncode == 3, text  # a stage error, not a gate failure or a crash
    assert "refused the reply of worker tcp://127.0.0.1:" in text, text
    assert "Traceback" not in text
    failed = [line for line in result.stderr.splitlines() if line.startswith("stage '")]
    assert failed and all("refused the reply" in line for line in failed), text
    assert not target.exists()
    assert not Path("/", marker).exists()  # where 40 x ../ would have led
    assert not [p for p in tmp_path.rglob(f"*{marker}*")]
    logs = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.log"))
    assert "ROGUE LOG" not in logs  # none of the worker's text was written either
    store = Store(cache)
    for key in store.entry_keys():  # nothing it sent reached the store
        entry = store.lookup(key)
        assert entry is not None, key
        assert not any(marker in str(f) for f in entry.path.rglob("*")), key
