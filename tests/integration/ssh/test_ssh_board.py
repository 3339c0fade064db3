"""A target on a board reached over SSH (`runs_on: {kind: ssh}`), against a real sshd
on loopback: the board's stages run there by content (the sshd cannot see the
project folder), with the same digests and verdicts as a local run; an unreachable
board or one without edgebuild is "not measurable here" and the policy decides."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import edgebuild

pytestmark = pytest.mark.ssh

SSHD = Path("/usr/sbin/sshd")

BOARD = """\
name: loop-board
description: A Linux board reached over ssh (a real sshd on loopback here).
backend: onnxruntime
device: {{kind: cpu, arch: x86_64, name: loopback sshd standing in for a board}}
options: {{graph_optimization_level: basic}}
runs_on: {{kind: ssh, host: {host}, python: {python}}}
measure: {{warmup_iterations: 1, min_iterations: 20, min_seconds: 0.2, max_busy_share: null}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real sshd on 127.0.0.1 in its own mount namespace, where the project folder
    (tmp_path/project) is an empty tmpfs: a board that cannot read the client's files.
    Yields (destination, ssh config file)."""
    if not SSHD.is_file() or shutil.which("ssh") is None:
        pytest.skip("needs OpenSSH's server and client (apt-get install openssh-server)")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs `unshare -m` (root) to hide the project folder from the board")
    keys = tmp_path / "ssh"
    keys.mkdir(mode=0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(keys / name)], check=True)
    shutil.copy(keys / "client_key.pub", keys / "authorized_keys")
    port = free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host_key'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        f"PasswordAuthentication no\nStrictModes no\nUsePAM no\nPidFile {keys / 'sshd.pid'}\n"
        "SetEnv CI=true\n")
    (keys / "config").write_text(
        f"Host board\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        f"  IdentityFile {keys / 'client_key'}\n  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)  # its privilege-separation folder
    proc = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", f"mount -t tmpfs none '{project}' && exec {SSHD} -D -e "
         f"-f {keys / 'sshd_config'}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    try:
        yield "board", keys / "config"
    finally:
        proc.kill()
        proc.wait()


def board_recipe(tiny_project: Callable[..., Path], host: str, python: str) -> Path:
    recipe = tiny_project()
    (recipe.parent / "targets").mkdir()
    (recipe.parent / "targets" / "loop-board.yaml").write_text(
        BOARD.format(host=host, python=python))
    text = recipe.read_text().replace("targets:\n  host-cpu:", "targets:\n  loop-board:")
    recipe.write_text(text.replace(
        "    measure: {warmup_iterations: 1, min_iterations: 5, max_busy_share: null, "
        "min_seconds: 0}\n", ""))
    return recipe


def run(recipe: Path, out: Path, config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    import os

    os.environ["EDGEBUILD_SSH_CONFIG"] = str(config)
    try:
        return edgebuild("run", str(recipe), "--out", str(out), *extra, cwd=recipe.parent)
    finally:
        del os.environ["EDGEBUILD_SSH_CONFIG"]


def report(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_board_stages_run_over_ssh_by_content(tiny_project: Callable[..., Path],
                                              tmp_path: Path,
                                              sshd: tuple[str, Path]) -> None:
    host, config = sshd
    recipe = board_recipe(tiny_project, host, sys.executable)
    result = run(recipe, tmp_path / "out", config)
    assert result.returncode == 0, result.stdout + result.stderr
    stages = {s["id"]: s for s in report(tmp_path / "out")["stages"]}
    on_board = {sid for sid, s in stages.items() if s["worker"] == f"ssh:{host}"}
    assert on_board == {sid for sid, s in stages.items()
                        if s["op"] in ("infer", "measure-latency")}, stages
    gates = {g["gate"]: g for t in report(tmp_path / "out")["targets"] for g in t["gates"]}
    assert gates["latency"]["status"] == "passed"
    assert gates["accuracy"]["measured"]["top1_agreement"] == 100.0
    # The same infer digest as this machine computing it locally: edit the profile to host.
    profile = recipe.parent / "targets" / "loop-board.yaml"
    profile.write_text(profile.read_text().replace(
        f"runs_on: {{kind: ssh, host: {host}, python: {sys.executable}}}", ""))
    local = run(recipe, tmp_path / "local", config)
    assert local.returncode == 0, local.stdout
    local_infer = next(s for s in report(tmp_path / "local")["stages"] if s["op"] == "infer")
    remote_infer = next(s for s in stages.values() if s["op"] == "infer")
    assert local_infer["worker"] == "" and remote_infer["artifact_digest"] == \
        local_infer["artifact_digest"]


@pytest.mark.slow
def test_unreachable_board_is_not_measurable(tiny_project: Callable[..., Path],
                                             tmp_path: Path, sshd: tuple[str, Path]) -> None:
    _, config = sshd
    recipe = board_recipe(tiny_project, f"ssh://root@127.0.0.1:{free_port()}", sys.executable)
    result = run(recipe, tmp_path / "out", config, "--keep-going")
    assert result.returncode == 1, result.stdout + result.stderr  # policy.unmeasurable: fail
    assert "not measurable here: cannot reach ssh host ssh://root@127.0.0.1:" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.slow
def test_board_without_edgebuild_is_not_measurable(tiny_project: Callable[..., Path],
                                                   tmp_path: Path,
                                                   sshd: tuple[str, Path]) -> None:
    host, config = sshd
    recipe = board_recipe(tiny_project, host, "/usr/bin/python3")  # no edgebuild there
    result = run(recipe, tmp_path / "out", config, "--keep-going")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "edgebuild is not installed on ssh host board for /usr/bin/python3" in result.stdout
