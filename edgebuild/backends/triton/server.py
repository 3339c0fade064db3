"""Start the bundled tritonserver on free loopback ports, wait until it is ready, and
always stop it.

    with serve(repository, env, log) as server:   # HTTP only, on 127.0.0.1:<free port>
        client.infer(server.url, "model", feeds)
    # here the server and its Python stub processes are gone, whatever happened inside

The server runs in a session of its own (its Python backend stubs are its children), so
stopping kills the whole group; it also gets SIGKILL from the kernel if this process dies
first (PR_SET_PDEATHSIG), so not even `kill -9` of the run leaves it listening. gRPC and
metrics are off: nothing listens but the HTTP port, and only on loopback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from edgebuild.backends.triton.env import ServerEnv
from edgebuild.errors import StageError

READY_SECONDS = 180.0
STOP_SECONDS = 10.0
PORT_TRIES = 3


@dataclass
class Server:
    url: str  # http://127.0.0.1:<port>
    process: subprocess.Popen[bytes]
    log: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def command(env: ServerEnv, repository: Path, port: int) -> list[str]:
    return [str(env.tritonserver), f"--model-repository={repository}",
            f"--backend-directory={env.backends}", f"--cache-directory={env.caches}",
            "--http-address=127.0.0.1", f"--http-port={port}", "--allow-grpc=false",
            "--allow-metrics=false", "--allow-gpu-metrics=false", "--strict-readiness=true",
            "--exit-on-error=true", "--log-verbose=0"]


def _environment(env: ServerEnv, threads: int | None) -> dict[str, str]:
    environ = dict(os.environ)
    environ["LD_LIBRARY_PATH"] = env.library_path()
    # The stub embeds the venv interpreter's libpython: it must see the venv's packages.
    environ["PYTHONPATH"] = str(env.site_packages)
    environ.pop("PYTHONHOME", None)
    if threads:
        environ["EDGEBUILD_TRITON_THREADS"] = str(threads)
    return environ


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=2) as answer:
            return int(answer.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, SIGKILL after STOP_SECONDS; waits."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_SECONDS)
    with contextlib.suppress(ProcessLookupError):  # stubs left behind, the server itself
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(STOP_SECONDS)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def serve(repository: Path, env: ServerEnv, log: Path,
          threads: int | None = None) -> Iterator[Server]:
    """The server, ready, for the `with` block; stopped on every way out of it.

    PR_SET_PDEATHSIG fires when the *thread* that started the server ends: enter and
    leave the block in the same thread (a stage does)."""
    for attempt in range(PORT_TRIES):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with log.open("wb") as sink:
            process = subprocess.Popen(command(env, repository, port), stdout=sink,
                                       stderr=subprocess.STDOUT,
                                       env=_environment(env, threads),
                                       start_new_session=True, preexec_fn=_die_with_parent)
        try:
            if _wait_ready(process, url, log, last=attempt == PORT_TRIES - 1):
                break
        except BaseException:
            stop(process)
            raise
        stop(process)  # another process took the port between our probe and its bind
    try:
        yield Server(url, process, log)
    finally:
        stop(process)


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path, last: bool) -> bool:
    """True once ready; False when it lost its port to another process (retry); raises
    when it exited for another reason or never became ready."""
    deadline = time.monotonic() + READY_SECONDS
    while not _ready(url):
        if process.poll() is not None:
            if not last and "address already in use" in _tail(log, 40).lower():
                return False
            raise StageError(f"tritonserver exited with code {process.returncode} before "
                             f"it was ready; its log ({log}) ends:\n{_tail(log)}",
                             "a model that fails to load stops the server "
                             "(--exit-on-error): see the log")
        if time.monotonic() > deadline:
            raise StageError(f"tritonserver was not ready after {READY_SECONDS:.0f} s; "
                             f"its log ({log}) ends:\n{_tail(log)}")
        time.sleep(0.2)
    return True
