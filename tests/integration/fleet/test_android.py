"""The agent on a host pushing to an Android phone with the real adb (fleet/android.py).

Without a phone (here) the agent refuses — adb says none is attached — and nothing is
activated, on the host either. With one attached, the release is pushed under
/data/local/tmp, checked there with sha256sum and activated by a rename: that test is
skipped here with the reason. Each test talks to its own adb server (a free port,
killed afterwards), never to one the machine already runs."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild.core.manifest import read_manifest
from edgebuild.devices.adb import connect, find_adb
from edgebuild.errors import ExitCode
from tests.conftest import edgebuild
from tests.integration.fleet.conftest import free_port, ok, state

pytestmark = pytest.mark.onnxruntime
pytest.importorskip("onnxruntime", reason="the tiny build and the model check need onnxruntime")
DIR = "/data/local/tmp/edgebuild-test/production"


@pytest.fixture
def own_adb_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if find_adb() is None:
        pytest.skip("adb is not installed (apt-get install adb)")
    # A phone is reached through the machine's adb server (port 5037); this test starts
    # its own on a free port unless a phone is meant to be used.
    if not os.environ.get("EDGEBUILD_TEST_PHONE"):
        monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(free_port()))
    yield
    if not os.environ.get("EDGEBUILD_TEST_PHONE"):
        subprocess.run([str(find_adb()), "kill-server"], capture_output=True, check=False,
                       timeout=30)


@pytest.fixture
def promoted(build: Path, keys: dict[str, Path], tmp_path: Path) -> Path:
    folder = tmp_path / "registry"
    ok(edgebuild("publish", str(build), "--to", f"oci-layout:{folder}", "--version", "1.0.0"))
    ok(edgebuild("promote", f"oci-layout:{folder}:1.0.0", "production", "--key",
                 str(keys["release"])))
    return folder


def agent(registry: Path, root: Path, trusted: Path, *extra: str) -> Any:
    return edgebuild("agent", "--from", f"oci-layout:{registry}", "--channel", "production",
                     "--target", "host-cpu", "--root", str(root), "--trust", str(trusted),
                     "--once", "--adb", *extra)


def test_without_a_phone_nothing_is_activated(own_adb_server: None, promoted: Path,
                                              keys: dict[str, Path], tmp_path: Path) -> None:
    if os.environ.get("EDGEBUILD_TEST_PHONE"):
        pytest.skip("a phone is attached (EDGEBUILD_TEST_PHONE): the next test uses it")
    root = tmp_path / "host"
    text = ok(agent(promoted, root, keys["trusted"], "--device-dir", DIR),
              ExitCode.STAGE_FAILED)
    why = "adb: cannot push to the phone: no Android device attached"
    assert why in text
    assert not (root / "current").exists()
    found = state(root)
    assert found["active"] is None and found["events"][-1]["action"] == "refused"
    assert why in found["events"][-1]["reason"]


def test_a_device_dir_outside_data_local_tmp_is_a_usage_error(
        promoted: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    done = agent(promoted, tmp_path / "host", keys["trusted"], "--device-dir", "/sdcard/x")
    assert done.returncode == ExitCode.USAGE, done.stdout + done.stderr
    assert "not a folder under /data/local/tmp/" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_a_release_is_pushed_checked_and_activated_on_the_phone(
        own_adb_server: None, promoted: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    phone = connect(os.environ.get("EDGEBUILD_TEST_PHONE") or None)
    if isinstance(phone, str):
        pytest.skip(f"{phone} (set EDGEBUILD_TEST_PHONE=SERIAL with a phone attached)")
    root = tmp_path / "host"
    ok(agent(promoted, root, keys["trusted"], phone.device.serial, "--device-dir", DIR))
    folder = state(root)["active"]["folder"]
    shipped = read_manifest(root / "current" / "manifest.json")
    link = subprocess.run(phone.argv("shell", f"readlink {DIR}/current"), capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()
    assert link == f"releases/{folder}"
    sums = subprocess.run(phone.argv("shell", f"cd {DIR}/current && sha256sum -- "
                                     + " ".join(f.name for f in shipped.files)),
                          capture_output=True, text=True, check=True, timeout=60).stdout
    assert {line.split()[0] for line in sums.splitlines()} == {f.sha256 for f in shipped.files}
    subprocess.run(phone.argv("shell", f"rm -rf {DIR}"), check=True, timeout=60)
