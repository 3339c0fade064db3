"""A target's device stages on a board reached over SSH (`runs_on: {kind: ssh}`), no Dask.

The same worker contract as a Dask worker (execute/remote.py), over one ssh
command per stage:

    client ── tar on stdin: task.json + every file the stage reads (by digest) ──▶
              ssh HOST 'PYTHON -m edgebuild.devices.ssh'
                └ unpack, check digests, run_remote (the stage in its own process,
                  the same latency protocol as a local run), tar on stdout
    client ◀── result.json (result, log) + the output files ──────────────────────┘

The board needs edgebuild and its backend's runtime installed (`runs_on.python`
names that Python). edgebuild runs your `ssh`: keys, ports and jump hosts come
from your ssh configuration (or the file in $EDGEBUILD_SSH_CONFIG); it never
asks for a password (BatchMode). A host that cannot be reached, or that lacks
edgebuild, makes the stage "not measurable here" and the recipe's policy decides.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from edgebuild.execute.task import StageTask, TaskOutcome

SSH_CONFIG_ENV = "EDGEBUILD_SSH_CONFIG"
TIMEOUT_S = 3600.0  # one stage; a hung board must not hang the build forever


def ssh_command(host: str, remote: str) -> list[str]:
    config = os.environ.get(SSH_CONFIG_ENV)
    return ["ssh", *(["-F", config] if config else []), "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=30", host, remote]


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _pack(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|gz") as tar:
        for name, data in members.items():
            _add(tar, name, data)
    return buffer.getvalue()


def _unpack(data: bytes) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:
        for member in tar:
            handle = tar.extractfile(member)
            if handle is not None:
                members[member.name] = handle.read()
    return members


def run_over_ssh(task: StageTask, host: str, python: str,
                 digests: dict[Path, str] | None = None) -> TaskOutcome:
    """Run `task` on `host`; its result, log and output files come back here."""
    from edgebuild.core.target import ssh_tag
    from edgebuild.execute.carry import carry
    from edgebuild.execute.remote import task_files

    started = time.time()
    carried = carry(task.spec, digests)
    files = task_files(carried.spec, carried.files)
    header = {"spec": carried.spec, "digests": {d: digest for d, (digest, _) in files.items()},
              "resources": [ssh_tag(host)], "expect_modules": carried.expect_modules}
    members = {"task.json": json.dumps(header).encode()}
    members.update({f"files/{dest}": path.read_bytes() for dest, (_, path) in files.items()})
    command = ssh_command(host, f"{shlex.quote(python)} -m edgebuild.devices.ssh")
    try:
        proc = subprocess.run(command, input=_pack(members), capture_output=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return TaskOutcome({"status": "error", "message": f"the stage on ssh host {host} "
                            f"did not finish within {TIMEOUT_S:g} s"}, started, time.time())
    except FileNotFoundError:
        return _unmeasurable(f"no `ssh` client on this machine to reach {host}",
                             "install OpenSSH's client", started)
    stderr = proc.stderr.decode(errors="replace").strip()
    if proc.returncode == 255:
        return _unmeasurable(f"cannot reach ssh host {host}: {_last(stderr)}",
                             "check `ssh HOST true` works without a password prompt "
                             f"(keys in your ssh config, or ${SSH_CONFIG_ENV})", started)
    if re.search(r"No module named '?edgebuild\b", stderr) or proc.returncode == 127:
        return _unmeasurable(f"edgebuild is not installed on ssh host {host} for "
                             f"{python}: {_last(stderr)}",
                             "install edgebuild and the backend there, or set "
                             "`runs_on.python` to the Python that has it", started)
    try:
        back = _unpack(proc.stdout)
        done = json.loads(back.pop("result.json"))
    except (tarfile.TarError, KeyError, ValueError):
        return TaskOutcome({"status": "error", "message": f"ssh host {host} sent no result "
                            f"(exit {proc.returncode}): {_last(stderr)}"}, started, time.time())
    task.log.parent.mkdir(parents=True, exist_ok=True)
    task.log.write_text(done["log"])
    out = Path(task.spec["out"])
    for name, data in back.items():
        file = out / name.removeprefix("out/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
    return TaskOutcome(done["result"], started, time.time(), {"worker": f"ssh:{host}"})


def _unmeasurable(reason: str, hint: str, started: float) -> TaskOutcome:
    return TaskOutcome({"status": "unmeasurable", "reason": f"not measurable here: {reason}",
                        "hint": hint}, started, time.time())


def _last(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def serve_stdin() -> int:
    """The board's side: a task tar on stdin, a result tar on stdout."""
    from edgebuild.execute.remote import run_remote

    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but the result tar may reach the client's stdout
    members = _unpack(sys.stdin.buffer.read())
    header = json.loads(members.pop("task.json"))
    files = {dest: (digest, members[f"files/{dest}"])
             for dest, digest in header["digests"].items()}
    done = run_remote(header["spec"], files, header["resources"], header["expect_modules"])
    result = {"result": done["result"], "log": done["log"]}
    back = {"result.json": json.dumps(result).encode()}
    back.update({f"out/{name}": data for name, data in done["files"].items()})
    stdout.write(_pack(back))
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve_stdin())
