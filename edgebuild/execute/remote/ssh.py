"""SshTransport: a target's device stages on a board reached over SSH
(`runs_on: {kind: ssh}`), no Dask.

The same worker contract as a Dask worker (far_side.py) and the same sequence
(transport.py `ship`: carry, send, run, write back), over one ssh command per stage:

    client ── tar on stdin: task.json + every file the stage reads (by digest) ──▶
              ssh HOST 'PYTHON -m edgebuild.execute.remote.ssh'
                └ unpack, check digests, run_remote (the stage in its own process,
                  the same latency protocol as a local run), tar on stdout
    client ◀── result.json (result, log) + the output files ──────────────────────┘

The board needs edgebuild and its backend's runtime installed (`runs_on.python`
names that Python). edgebuild runs your `ssh`: keys, ports and jump hosts come
from your ssh configuration (or the file in $EDGEBUILD_SSH_CONFIG); it never
asks for a password (BatchMode). A host that cannot be reached, or that lacks
edgebuild, makes the stage "not measurable here" and the recipe's policy decides.

The board is not trusted with the client's files (docs/security.md): what it sends
back is read through a bounded stream (at most MAX_RESULT_BYTES, compressed and
unpacked), must be regular files named `result.json` or `out/<relative path>`, each
name confined to the stage's output folder (core/paths.confined), and result.json
must be a `BoardReply`. Everything is checked before the first byte is written; a
reply that fails any check is a one-line stage error (RefusedReply) and nothing of it
is written.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import threading
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from edgebuild.core.paths import confined
from edgebuild.core.stage_result import StageResult, first_error
from edgebuild.errors import EdgebuildError
from edgebuild.execute.remote.returned import RefusedReply, Reply

if TYPE_CHECKING:  # the board imports this module: it needs none of them
    from edgebuild.execute.remote.carry import Carried
    from edgebuild.execute.remote.far_side import Files, Sources
    from edgebuild.execute.task import StageTask

SSH_CONFIG_ENV = "EDGEBUILD_SSH_CONFIG"
TIMEOUT_S = 3600.0  # one stage; a hung board must not hang the build forever
# A board's reply, compressed and again unpacked: a device stage returns measurements
# and model outputs on a dataset, far below this; a stream without end is cut here.
MAX_RESULT_BYTES = 2 * 1024**3
MAX_MEMBERS = 100_000
MAX_STDERR = 64 * 1024  # the tail of ssh's stderr kept for the message
BOARD = "edgebuild.execute.remote.ssh"  # what the board runs: this module
RESULT = "result.json"
OUT_PREFIX = "out/"


def ssh_command(host: str, remote: str) -> list[str]:
    """The ssh argv; `--` ends ssh's options, so no `host` is ever read as one
    (profiles refuse a host beginning with '-' as well: core/profile.py)."""
    config = os.environ.get(SSH_CONFIG_ENV)
    return ["ssh", *(["-F", config] if config else []), "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=30", "--", host, remote]


class BoardReply(BaseModel):
    """result.json in a board's reply tar."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    result: StageResult
    log: str


class _Bounded(io.RawIOBase):
    """A readable stream that refuses to yield more than `limit` bytes in all."""

    def __init__(self, raw: io.BufferedIOBase, limit: int, what: str) -> None:
        self.raw, self.left, self.what = raw, limit, what
        self.limit = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise EdgebuildError(f"{self.what} is larger than {self.limit} bytes")
        self.left -= len(data)
        buffer[:len(data)] = data
        return len(data)


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
    """The board's side: the client's task tar (the client is trusted by the board)."""
    members: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:
        for member in tar:
            handle = tar.extractfile(member)
            if handle is not None:
                members[member.name] = handle.read()
    return members


def _member_kind(member: tarfile.TarInfo) -> str:
    for kind, test in (("symlink", member.issym), ("hard link", member.islnk),
                       ("folder", member.isdir), ("device", member.isdev)):
        if test():
            return kind
    return "special file"


def read_reply(data: bytes, out: Path) -> tuple[BoardReply, dict[Path, bytes]]:
    """A board's reply tar, checked whole: the typed result and, for a stage that
    succeeded, its output files by their destination inside `out`.

    Raises EdgebuildError (one line) at the first thing refused; nothing is written.
    """
    try:  # a gzip bomb stops at MAX_RESULT_BYTES unpacked
        gz = io.BufferedReader(_Bounded(gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb"),
                                        MAX_RESULT_BYTES, "the unpacked reply"))
        members: dict[str, bytes] = {}
        with tarfile.open(fileobj=gz, mode="r|") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise EdgebuildError(f"the reply has more than {MAX_MEMBERS} members")
                if not member.isreg():
                    raise EdgebuildError(f"refusing the {_member_kind(member)} "
                                         f"{member.name!r:.120}: a reply holds regular "
                                         "files only")
                if member.name != RESULT and not member.name.startswith(OUT_PREFIX):
                    raise EdgebuildError(f"refusing {member.name!r:.120}: a reply holds "
                                         f"{RESULT} and out/… only")
                if member.name in members:
                    raise EdgebuildError(f"refusing {member.name!r:.120}: sent twice")
                handle = tar.extractfile(member)
                members[member.name] = handle.read() if handle is not None else b""
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise EdgebuildError(f"the reply is not a gzip tar ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None
    if RESULT not in members:
        raise EdgebuildError(f"the reply has no {RESULT}")
    try:
        reply = BoardReply.model_validate_json(members.pop(RESULT))
    except ValidationError as exc:
        raise EdgebuildError(f"refusing {RESULT}: {first_error(exc)}") from None
    # Every name is checked, whatever the status (only an ok stage's files are written).
    files = {confined(out, name.removeprefix(OUT_PREFIX), "a file name"): content
             for name, content in members.items()}
    folders = {folder for path in files for folder in path.parents}
    clash = next((path for path in files if path in folders), None)
    if clash is not None:
        raise EdgebuildError(f"refusing {clash.relative_to(out.resolve())}: "
                             "sent both as a file and as a folder")
    if reply.result.status != "ok":
        return reply, {}
    assert reply.result.main is not None  # StageResult._complete
    confined(out, reply.result.main, "the main file's name")
    return reply, files


def task_payload(carried: Carried, files: Files, resource: str) -> bytes:
    """The tar a board reads on stdin (`serve_stdin`): task.json and the stage's files.
    `resource`: what the board's stage process holds (Target.runs_here reads it)."""
    header = {"spec": carried.spec, "digests": {d: digest for d, (digest, _) in files.items()},
              "resources": [resource], "expect_modules": carried.expect_modules}
    members = {"task.json": json.dumps(header).encode()}
    members.update({f"files/{dest}": data for dest, (_, data) in files.items()})
    return _pack(members)


def _exchange(command: list[str], payload: bytes, env: dict[str, str] | None = None
              ) -> tuple[int | None, bytes, str, str]:
    """Run `command` with `payload` on stdin: (exit code, stdout, stderr's tail, problem).
    stdout is cut at MAX_RESULT_BYTES and the run at TIMEOUT_S; `problem` says which
    (exit code None). `env`: the command's environment (default: this one's)."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stderr = proc.stdin, proc.stderr
    tail = bytearray()
    timed_out = threading.Event()

    def feed() -> None:
        try:
            stdin.write(payload)
            stdin.close()
        except OSError:  # the far side left early; its exit status tells why
            pass

    def drain() -> None:
        while chunk := stderr.read(8192):
            tail.extend(chunk)
            del tail[:-MAX_STDERR]

    def expire() -> None:
        timed_out.set()
        proc.kill()

    helpers = [threading.Thread(target=feed, daemon=True),
               threading.Thread(target=drain, daemon=True)]
    timer = threading.Timer(TIMEOUT_S, expire)
    for thread in (*helpers, timer):
        thread.start()
    out = bytearray()
    problem = ""
    try:
        while chunk := proc.stdout.read(1 << 20):
            out.extend(chunk)
            if len(out) > MAX_RESULT_BYTES:
                problem = f"sent more than {MAX_RESULT_BYTES} bytes"
                proc.kill()
                break
        proc.wait()
    finally:
        timer.cancel()
        proc.stdout.close()
        for thread in helpers:
            thread.join(timeout=10)
    if timed_out.is_set():
        problem = f"did not finish within {TIMEOUT_S:g} s"
    return (None if problem else proc.returncode), bytes(out), \
        tail.decode(errors="replace").strip(), problem


class SshTransport:
    """One board: a stage's files and task go in one tar on ssh's stdin, its reply comes
    back as a tar on ssh's stdout. Never `Lost`: a board that cannot be reached makes
    the stage "not measurable here", and the recipe's policy decides."""

    attempt = "the ssh command"

    def __init__(self, host: str, python: str) -> None:
        self.host, self.python = host, python
        self.where = f"ssh host {host}"

    def send(self, sources: Sources) -> Files:
        return {dest: (digest, path.read_bytes()) for dest, (digest, path) in sources.items()}

    def run(self, task: StageTask, carried: Carried, files: Files) -> Reply | StageResult:
        from edgebuild.core.target import ssh_tag

        host = self.host
        command = ssh_command(host, f"{shlex.quote(self.python)} -m {BOARD}")
        try:
            returncode, stdout, stderr, problem = _exchange(
                command, task_payload(carried, files, ssh_tag(host)))
        except FileNotFoundError:
            return _unmeasurable(f"no `ssh` client on this machine to reach {host}",
                                 "install OpenSSH's client")
        failed = self._failed(returncode, stdout, stderr, problem)
        if failed is not None:
            return failed
        try:
            reply, outputs = read_reply(stdout, Path(task.spec["out"]))
        except EdgebuildError as exc:
            raise RefusedReply(
                f"refusing the reply of ssh host {host}: {exc.message}",
                "nothing it sent was written; the board's edgebuild must be this version, "
                "and the board must be one you trust") from None
        return Reply(reply.result, reply.log, outputs, f"ssh:{host}")

    def recover(self) -> bool:
        return False  # never Lost

    def _failed(self, returncode: int | None, stdout: bytes, stderr: str,
                problem: str) -> StageResult | None:
        """What an ssh command that sent no reply means for the stage; None: a reply."""
        host = self.host
        if problem:
            return StageResult.error(f"the stage on ssh host {host} {problem}")
        if returncode == 255:
            return _unmeasurable(f"cannot reach ssh host {host}: {_last(stderr)}",
                                 "check `ssh HOST true` works without a password prompt "
                                 f"(keys in your ssh config, or ${SSH_CONFIG_ENV})")
        if re.search(r"No module named '?edgebuild\b", stderr) or returncode == 127:
            return _unmeasurable(f"edgebuild is not installed on ssh host {host} for "
                                 f"{self.python}: {_last(stderr)}",
                                 "install edgebuild and the backend there, or set "
                                 "`runs_on.python` to the Python that has it")
        if not stdout:
            return StageResult.error(f"ssh host {host} sent no result (exit {returncode}): "
                                     f"{_last(stderr)}")
        return None


def _unmeasurable(reason: str, hint: str) -> StageResult:
    return StageResult.unmeasurable(f"not measurable here: {reason}", hint)


def _last(text: str) -> str:
    """The last line of the far side's stderr, printable characters only (no terminal
    escapes from a board reach the user's terminal), at most 300 of them."""
    lines = [line for line in text.splitlines() if line.strip()]
    last = "".join(c if c.isprintable() else "?" for c in lines[-1])[:300] if lines else ""
    return last or "no message"


def serve_stdin() -> int:
    """The board's side: a task tar on stdin, a result tar on stdout."""
    from edgebuild.execute.remote.far_side import run_remote

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
