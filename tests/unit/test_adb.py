"""The adb transport shared by the backends that reach a phone (edgebuild/devices/adb.py):
parsing recorded `adb devices` output, choosing a phone, finding adb."""
# ruff: noqa: E501  -- recorded tool output is quoted verbatim, long lines included

from __future__ import annotations

from pathlib import Path

import pytest

from edgebuild.devices.adb import AdbDevice, find_adb, parse_devices, select_device

# --- Recorded adb output ----------------------------------------------------------------

# `adb devices -l`. Sources: https://github.com/prife/goadb/issues/2 and
# https://github.com/cocool97/adb_client/pull/94 (one device line each).
DEVICES_TWO = """\
List of devices attached
UYT5T18414003349       device usb:1114112X product:ALP-AL00 model:ALP_AL00 device:HWALP transport_id:23
n311r05e               device usb:0-1.5 product:alioth model:M2012K11AC device:alioth transport_id:58
"""
DEVICES_ONE = "List of devices attached\n" + DEVICES_TWO.splitlines()[1] + "\n"
# `adb devices` (short form). Sources: Paddle-Lite benchmark docs
# (https://paddlepaddle.github.io/Paddle-Lite/v2.1.0/benchmark_tools/), pastebin
# https://pastebin.com/tHXQQd3F and https://pastebin.com/1UfFbyWZ.
DEVICES_SHORT = "List of devices attached\n712QSDSEMMS7C\tdevice\n"
DEVICE_OFFLINE = "List of devices attached\nSH12ARX01601\toffline\n"
DEVICE_NO_PERMISSIONS = "List of devices attached\n????????????\tno permissions\n"
DEVICES_NONE = "List of devices attached\n\n"



def test_parse_devices_long_and_short_forms() -> None:
    first, second = parse_devices(DEVICES_TWO)
    assert (first.serial, first.state, first.ready) == ("UYT5T18414003349", "device", True)
    assert dict(first.details) == {"usb": "1114112X", "product": "ALP-AL00",
                                   "model": "ALP_AL00", "device": "HWALP",
                                   "transport_id": "23"}
    assert second.details["model"] == "M2012K11AC" and second.details["usb"] == "0-1.5"
    assert [(d.serial, d.state) for d in parse_devices(DEVICES_SHORT)] == [
        ("712QSDSEMMS7C", "device")]
    assert parse_devices(DEVICE_OFFLINE)[0].state == "offline"
    assert parse_devices(DEVICE_NO_PERMISSIONS)[0].state == "no permissions"
    assert parse_devices(DEVICES_NONE) == []
    assert parse_devices("* daemon not running; starting now at tcp:5037\n"
                         "* daemon started successfully\n" + DEVICES_NONE) == []


def test_select_device_reasons() -> None:
    two = parse_devices(DEVICES_TWO)
    reason = select_device(two, None)
    assert isinstance(reason, str) and reason.startswith("not measurable here: 2 Android")
    assert "UYT5T18414003349 (ALP_AL00)" in reason and "runs_on: {kind: adb, serial" in reason
    chosen = select_device(two, "n311r05e")
    assert not isinstance(chosen, str) and chosen.serial == "n311r05e"
    assert select_device([], None) == ("not measurable here: no Android device attached "
                                       "(`adb devices` lists none)")
    missing = select_device(two, "emulator-5554")
    assert isinstance(missing, str) and "emulator-5554 is not attached" in missing
    offline = select_device(parse_devices(DEVICE_OFFLINE), None)
    assert isinstance(offline, str) and "SH12ARX01601 is offline" in offline
    unauthorized = select_device([AdbDevice("R58M", "unauthorized")], "R58M")
    assert isinstance(unauthorized, str) and "USB debugging prompt" in unauthorized


def test_adb_from_android_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "sdk" / "platform-tools"
    tools.mkdir(parents=True)
    adb = tools / "adb"
    adb.write_text("#!/bin/sh\nexit 0\n")
    adb.chmod(0o755)
    assert find_adb({"PATH": str(tmp_path / "nowhere"), "ANDROID_HOME": str(tmp_path / "sdk")}
                    ) == adb


def test_only_adbs_own_questions_are_asked() -> None:
    """A replay record is data: the commands it may ask again are these, and no other
    (run/replay.py); `ask` refuses anything else, so both sides agree."""
    from edgebuild.devices.adb import ask, is_question

    assert is_question(["/usr/bin/adb", "devices", "-l"])
    assert is_question(["adb", "-s", "R58M", "shell", "[ -x /data/local/tmp/benchmark_model ] "
                        "&& echo present || echo missing"])
    for argv in (["/bin/sh", "devices", "-l"], ["adb", "shell", "rm", "-rf", "/sdcard"],
                 ["adb", "-s", "R58M", "shell", "[ -x /x ] && echo present || rm -rf /"],
                 ["adb", "devices"], []):
        assert not is_question(argv), argv
        with pytest.raises(ValueError, match="not a question"):
            ask(argv, 1.0, "test")
