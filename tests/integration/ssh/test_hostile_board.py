"""A board reached over SSH is not trusted with the client's files (issue 28.7, 28.8).

No sshd here: a fake `ssh` first on PATH either runs the remote command on this
machine (an honest board) or answers with a prepared tar (a compromised board).
Every hostile reply is refused as a one-line stage error, and nothing is written
outside the run's folders."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytest.importorskip("onnxruntime", reason="the tiny project runs on ONNX Runtime")

BOARD = """\
name: fake-board
description: A Linux board behind a fake ssh.
backend: onnxruntime
device: {{kind: cpu, arch: x86_64, name: this machine behind a fake ssh}}
runs_on: {{kind: ssh, host: {host}, python: {python}}}
measure: {{warmup_iterations: 1, min_iterations: 5, min_seconds: 0, max_busy_share: null}}
"""

# argv: [ssh options...] -- HOST COMMAND. Logged; then either the prepared reply
# ($FAKE_SSH_REPLY, stdin swallowed) or COMMAND run here, as sshd would run it.
FAKE_SSH = """\
#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SSH_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
host, command = args[args.index("--") + 1:]
reply = os.environ.get("FAKE_SSH_REPLY")
if reply:
    sys.stdin.buffer.read()
    sys.stdout.buffer.write(open(reply, "rb").read())
    sys.exit(0)
sys.exit(subprocess.run(["sh", "-c", command]).returncode)
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake `ssh` first on PATH; yields the file its argv lines are logged to."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    script = folder / "ssh"
    script.write_text(FAKE_SSH.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh-argv.log"))
    monkeypatch.delenv("FAKE_SSH_REPLY", raising=False)
    yield tmp_path / "ssh-argv.log"


def board_recipe(tiny_project: Callable[..., Path], host: str = "board") -> Path:
    recipe = tiny_project()
    (recipe.parent / "targets").mkdir(exist_ok=True)
    (recipe.parent / "targets" / "fake-board.yaml").write_text(
        BOARD.format(host=json.dumps(host), python=sys.executable))
    text = recipe.read_text().replace("targets:\n  host-cpu:", "targets:\n  fake-board:")
    recipe.write_text(text.replace(
        "    measure: {warmup_iterations: 1, min_iterations: 5, max_busy_share: null, "
        "min_seconds: 0}\n", ""))
    return recipe


def reply_tar(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|gz") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                info = tarfile.TarInfo(member[0])
                info.size = len(member[1])
                tar.addfile(info, io.BytesIO(member[1]))
    return buffer.getvalue()


def result_json(status: str = "ok", **fields: object) -> tuple[str, bytes]:
    result = {"status": status, "reason": "", "main": "model.onnx", "format": "onnx",
              "metadata": {}, "seconds": 0.1, **fields}
    return "result.json", json.dumps({"result": result, "log": "board log"}).encode()


def files_outside(root: Path, *owned: Path) -> set[Path]:
    """Every file under `root` except in the folders a run and this test own."""
    return {p for p in root.rglob("*") if not p.is_dir()
            and not any(p == o or o in p.parents for o in owned)}


@pytest.mark.slow
def test_an_honest_board_runs_through_the_checks(tiny_project: Callable[..., Path],
                                                 tmp_path: Path, fake_ssh: Path) -> None:
    """A real reply (the board's side run by the fake ssh) passes every check: the typed
    result, the names, the sizes; and `--` comes before the host in ssh's argv."""
    recipe = board_recipe(tiny_project)
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"), cwd=recipe.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    on_board = {s["op"] for s in report["stages"] if s["worker"] == "ssh:board"}
    assert on_board == {"infer", "measure-latency"}, report["stages"]
    for line in fake_ssh.read_text().splitlines():
        argv = json.loads(line)
        assert argv[-3:-1] == ["--", "board"], argv


def hostile(name: str) -> list[tarfile.TarInfo | tuple[str, bytes]]:
    """A reply with one hostile member; `VICTIM` stands for a path outside the run."""
    link = tarfile.TarInfo("out/link")
    link.type, link.linkname = tarfile.SYMTYPE, "VICTIM"
    hard = tarfile.TarInfo("out/hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "VICTIM"
    device = tarfile.TarInfo("out/null")
    device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
    return {
        "absolute": [result_json(), ("VICTIM", b"pwned"), ("out/model.onnx", b"x")],
        "absolute-under-out": [result_json(), ("out//VICTIM", b"pwned")],
        "dotdot": [result_json(), ("out/../../../../../../../../VICTIM", b"pwned")],
        "symlink": [result_json(), link, ("out/link", b"pwned")],
        "hardlink": [result_json(), hard],
        "device": [result_json(), device],
        "main-escapes": [result_json(main="../../VICTIM"), ("out/model.onnx", b"x")],
        "unmeasurable-dotdot": [result_json("unmeasurable", reason="no device"),
                                ("out/../../../../../../../VICTIM", b"pwned")],
        "untyped-result": [("result.json", json.dumps(
            {"result": {"status": "ok", "main": "m", "format": "onnx", "seconds": 1,
                        "metadata": {}, "run": "this"}, "log": ""}).encode())],
    }[name]


@pytest.mark.slow
@pytest.mark.parametrize(("attack", "refusal"), [
    ("absolute", "a reply holds result.json and out/… only"),
    ("absolute-under-out", "not a plain relative path"),
    ("dotdot", "not a plain relative path"),
    ("symlink", "refusing the symlink 'out/link'"),
    ("hardlink", "refusing the hard link 'out/hard'"),
    ("device", "refusing the device 'out/null'"),
    ("main-escapes", "refusing the main file's name '../../"),
    ("unmeasurable-dotdot", "not a plain relative path"),
    ("untyped-result", "refusing result.json: result.run: Extra inputs are not permitted"),
])
def test_a_hostile_reply_writes_nothing(tiny_project: Callable[..., Path], tmp_path: Path,
                                        fake_ssh: Path, monkeypatch: pytest.MonkeyPatch,
                                        attack: str, refusal: str) -> None:
    victim = tmp_path / "victim" / "pwned.txt"
    members = []
    for member in hostile(attack):
        if isinstance(member, tarfile.TarInfo):
            member.name = member.name.replace("VICTIM", str(victim).lstrip("/"))
            member.linkname = member.linkname.replace("VICTIM", str(victim))
            members.append(member)
        else:
            name, data = member
            where = str(victim) if name == "VICTIM" else str(victim).lstrip("/")
            data = data.replace(b"VICTIM", str(victim).lstrip("/").encode())
            members.append((name.replace("VICTIM", where), data))
    (tmp_path / "reply.tar.gz").write_bytes(reply_tar(members))
    monkeypatch.setenv("FAKE_SSH_REPLY", str(tmp_path / "reply.tar.gz"))
    recipe = board_recipe(tiny_project)
    result = edgebuild("run", str(recipe), "--out", str(tmp_path / "out"), "--keep-going",
                       cwd=recipe.parent)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output  # a failed stage, not a gate verdict
    assert "refusing the reply of ssh host board: " in output
    assert refusal in output, output
    assert "Traceback" not in output
    assert not victim.exists() and not victim.parent.exists()
    assert files_outside(tmp_path, tmp_path / "out", tmp_path / "cache", tmp_path / "project",
                         tmp_path / "fake-bin", tmp_path / "reply.tar.gz", fake_ssh) == set()
    # The board's files never reached the cache either: only the run's own stages did.
    cached = {p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()}
    assert "pwned.txt" not in cached and "link" not in cached


def test_a_reply_without_end_is_cut(tiny_project: Callable[..., Path], tmp_path: Path,
                                    fake_ssh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip bomb: a small reply that unpacks past MAX_RESULT_BYTES is refused while it
    is read, not after it filled the memory or the disk."""
    from edgebuild.errors import EdgebuildError
    from edgebuild.execute.remote import ssh

    monkeypatch.setattr(ssh, "MAX_RESULT_BYTES", 1 << 20)
    bomb = reply_tar([result_json(), ("out/model.onnx", bytes(8 << 20))])
    assert len(bomb) < 64 << 10
    with pytest.raises(EdgebuildError, match="the unpacked reply is larger than 1048576"):
        ssh.read_reply(bomb, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("host", ["-oProxyCommand=touch MARKER", "board -oX", "-"])
def test_a_host_that_ssh_would_read_as_an_option_is_refused(
        tiny_project: Callable[..., Path], tmp_path: Path, fake_ssh: Path,
        host: str) -> None:
    marker = tmp_path / "marker"
    recipe = board_recipe(tiny_project, host.replace("MARKER", str(marker)))
    for command in ("validate", "run"):
        result = edgebuild(command, str(recipe), "--out", str(tmp_path / "out"),
                           cwd=recipe.parent) if command == "run" else \
            edgebuild(command, str(recipe), cwd=recipe.parent)
        output = result.stdout + result.stderr
        assert result.returncode == 2, output
        assert "fake-board.yaml" in output and "runs_on.host" in output, output
        assert ("cannot begin with '-'" in output) or ("one word without spaces" in output)
    assert not fake_ssh.exists()  # ssh never ran
    assert not marker.exists()
