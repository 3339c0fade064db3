"""The host-side agent for an Android phone (edgebuild/fleet/android.py): the adb
command lines it runs (confined remote paths, every shell word quoted), the check of
`sha256sum` on the phone against the manifest. Running them needs a phone:
tests/integration/fleet/test_android.py (skipped here: none attached)."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

import pytest

from edgebuild.core.manifest import ArtifactManifest, ManifestFile
from edgebuild.core.profile import Device, TargetProfile
from edgebuild.devices.adb import AdbDevice, Phone
from edgebuild.errors import EdgebuildError
from edgebuild.fleet.android import Commands, mismatch, parse_sums, remote_dir, remote_path

PHONE = Phone(Path("/usr/bin/adb"), AdbDevice("R5CT1234", "device", {"model": "SM_S911B"}))
BASE = "/data/local/tmp/edgebuild/production"
HEX = "ab" * 32


def phone_line(argv: list[str]) -> list[str]:
    """What the phone's sh runs for `adb -s S shell LINE`, split as sh splits it."""
    assert argv[:4] == ["/usr/bin/adb", "-s", "R5CT1234", "shell"] and len(argv) == 5
    return shlex.split(argv[4])


def test_the_phones_folder_is_confined_to_data_local_tmp() -> None:
    assert remote_dir(BASE + "/") == BASE
    for bad in ("/sdcard/edgebuild", "/data/local/tmp", "/data/local/tmp/../../system",
                "/data/local/tmp/a b", "/data/local/tmp/..", "/data/local/tmp/-rf",
                "/data/local/tmp/$(reboot)", "/data/local/tmp//x",
                "data/local/tmp/x", "/data/local/tmp/x;rm -rf /"):
        with pytest.raises(EdgebuildError, match="not a folder under /data/local/tmp/"):
            remote_dir(bad)


def test_a_file_name_reaches_the_phone_only_as_plain_names() -> None:
    assert remote_path(BASE, "model.tflite") == f"{BASE}/model.tflite"
    assert remote_path(BASE, "model.mlpackage/Data/weights.bin") == \
        f"{BASE}/model.mlpackage/Data/weights.bin"
    for bad in ("../x", "/etc/passwd", "a/../../b", "a\nb", "it's", "$(id)", "a//b", "",
                "-rf"):
        with pytest.raises(EdgebuildError, match="cannot go to the phone"):
            remote_path(BASE, bad)


def test_the_adb_command_lines() -> None:
    commands = Commands(PHONE, BASE)
    staging = f"{BASE}/releases/.staging-{HEX}"
    final = f"{BASE}/releases/{HEX}"
    assert phone_line(commands.prepare(HEX, ["model.tflite", "labels/en.txt"])) == [
        "rm", "-rf", staging, "&&", "mkdir", "-p", staging, f"{staging}/labels"]
    # adb push: the remote path goes through the sync protocol, never a shell.
    assert commands.push(Path("/host/r/files/model.tflite"), HEX, "model.tflite") == [
        "/usr/bin/adb", "-s", "R5CT1234", "push", "/host/r/files/model.tflite",
        f"{staging}/model.tflite"]
    assert phone_line(commands.sums(HEX, ["model.tflite", "labels/en.txt"])) == [
        "cd", staging, "&&", "sha256sum", "--", "model.tflite", "labels/en.txt"]
    assert phone_line(commands.rename(HEX)) == ["rm", "-rf", final, "&&", "mv", staging, final]
    # Activation: a new relative symlink renamed over `current` (rename(2): atomic).
    assert phone_line(commands.activate(HEX)) == [
        "ln", "-sfn", f"releases/{HEX}", f"{BASE}/.current-new", "&&",
        "mv", "-fT", f"{BASE}/.current-new", f"{BASE}/current"]
    assert phone_line(commands.remove(HEX)) == ["rm", "-rf", final]


def test_every_shell_word_is_quoted() -> None:
    # A folder name the validation allows still reaches sh as one word.
    commands = Commands(PHONE, "/data/local/tmp/edge+build/prod-1.2_x")
    line = commands.remove(HEX)[4]
    assert shlex.split(line) == ["rm", "-rf", f"/data/local/tmp/edge+build/prod-1.2_x/"
                                 f"releases/{HEX}"]
    assert ";" not in line and "$" not in line and "`" not in line


def manifest(files: dict[str, bytes]) -> ArtifactManifest:
    profile = TargetProfile(name="android", description="", backend="tflite",
                            device=Device(kind="npu", arch="aarch64", os="android",
                                          name="Android phone"))
    return ArtifactManifest(
        edgebuild_version="0", created="2026-11-27T00:00:00Z", recipe="r", target="android",
        profile=profile, backend="tflite", backend_version=1, tools={}, precision="fp32",
        builds_on_device=False, stage="compile", stage_key="0" * 64, format="tflite",
        main="model.tflite", passed=True,
        files=[ManifestFile(name=n, sha256=hashlib.sha256(d).hexdigest(), size=len(d))
               for n, d in files.items()])


def test_the_phones_sha256sum_is_checked_against_the_manifest() -> None:
    files = {"model.tflite": b"tflite flatbuffer", "labels/en.txt": b"cat\ndog\n"}
    record = manifest(files)
    good = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in files.items())
    assert parse_sums(good) == {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    assert mismatch(record, parse_sums(good)) is None
    # toybox prints the same "<hex>  <name>"; coreutils' binary mode "<hex> *<name>".
    assert mismatch(record, parse_sums(good.replace("  ", " *"))) is None
    flipped = good.replace(hashlib.sha256(b"cat\ndog\n").hexdigest(), "0" * 64)
    assert mismatch(record, parse_sums(flipped)) == \
        "other bytes on the phone than the manifest's: labels/en.txt"
    one = good.splitlines()[0] + "\nsha256sum: labels/en.txt: No such file or directory\n"
    assert mismatch(record, parse_sums(one)) == \
        "not on the phone after the push: labels/en.txt"
