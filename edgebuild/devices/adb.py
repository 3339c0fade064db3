"""Android devices over adb: find adb, list and pick a phone, run commands on it.

    find_adb() -> `adb devices -l` -> parse_devices -> select_device(serial)
        -> connect(serial) -> Phone: phone.argv("shell", ...), run(argv, timeout, what)

Every "no" is a sentence starting with "not measurable here:" (no adb, no phone,
two phones and no serial, an unauthorized phone with what to do about it), so a
backend can hand it to the gate as it is. Backends add what they run on the phone
(TFLite: benchmark_model, backends/tflite/device.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from edgebuild.errors import StageError

DEVICE_DIR = "/data/local/tmp"  # writable by `adb shell` on every Android version
PLATFORM_TOOLS = "https://developer.android.com/tools/releases/platform-tools"


@dataclass(frozen=True)
class AdbDevice:
    """One line of `adb devices -l`: serial, state ("device" when usable) and details."""

    serial: str
    state: str
    details: Mapping[str, str] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.state == "device"

    def describe(self) -> str:
        model = self.details.get("model")
        return f"{self.serial} ({model})" if model else self.serial


def find_adb(env: Mapping[str, str] | None = None) -> Path | None:
    """adb from PATH, else $ANDROID_HOME (or the older $ANDROID_SDK_ROOT)/platform-tools."""
    env = os.environ if env is None else env
    found = shutil.which("adb", path=env.get("PATH", ""))
    if found:
        return Path(found)
    for var in ("ANDROID_HOME", "ANDROID_SDK_ROOT"):
        if env.get(var):
            candidate = Path(env[var]) / "platform-tools" / "adb"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None


def parse_devices(text: str) -> list[AdbDevice]:
    """Devices from `adb devices` or `adb devices -l` output.

    The long form is `"%-22s %s"` (serial, state) then optional ` usb:...`, `product:`,
    `model:`, `device:` and ` transport_id:N` (adb transport.cpp `append_transport`);
    the short form is `serial<TAB>state`. A state can hold spaces ("no permissions (...)").
    """
    devices = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("List of devices", "*", "adb server", "adb: ")):
            continue
        if "\t" in line:
            serial, rest = line.split("\t", 1)
        else:
            serial, _, rest = line.partition(" ")
        details: dict[str, str] = {}
        state_words = []
        for word in rest.split():
            key, sep, value = word.partition(":")
            if sep and key in ("product", "model", "device", "transport_id", "usb"):
                details[key] = value
            else:
                state_words.append(word)
        devices.append(AdbDevice(serial.strip(), " ".join(state_words), details))
    return devices


def _state_hint(device: AdbDevice) -> str:
    if device.state == "unauthorized":
        return "accept the USB debugging prompt on the phone"
    if device.state == "offline":
        return "reconnect it or run `adb kill-server`"
    if device.state.startswith("no permissions"):
        return "fix the udev rules for the phone's USB id"
    return "it must be in the 'device' state"


def select_device(devices: Sequence[AdbDevice], serial: str | None) -> AdbDevice | str:
    """The device to use, or a reason starting with "not measurable here:"."""
    if serial:
        match = [d for d in devices if d.serial == serial]
        if not match:
            listed = ", ".join(d.serial for d in devices) or "none"
            return (f"not measurable here: Android device {serial} is not attached "
                    f"(`adb devices` lists: {listed})")
        if not match[0].ready:
            return (f"not measurable here: Android device {serial} is {match[0].state}; "
                    f"{_state_hint(match[0])}")
        return match[0]
    if not devices:
        return "not measurable here: no Android device attached (`adb devices` lists none)"
    ready = [d for d in devices if d.ready]
    if not ready:
        d = devices[0]
        return (f"not measurable here: no usable Android device: {d.serial} is {d.state}; "
                f"{_state_hint(d)}")
    if len(ready) > 1:
        names = ", ".join(d.describe() for d in ready)
        return (f"not measurable here: {len(ready)} Android devices attached ({names}); name "
                "one in the target profile's `runs_on: {kind: adb, serial: …}` (or set "
                "$ANDROID_SERIAL)")
    return ready[0]


def run(argv: Sequence[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, errors="replace",
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise StageError(f"{what} did not finish in {timeout:g} s",
                         "check the phone is awake and `adb devices` answers") from err
    except OSError as err:
        raise StageError(f"{what} could not start: {err}",
                         f"install Android platform-tools ({PLATFORM_TOOLS})") from err


# The questions `ask` puts: `adb devices -l`, and a file test on one phone.
_FILE_TEST = re.compile(r"\[ -x [\w./-]+ \] && echo present \|\| echo missing")


def is_question(argv: Sequence[str]) -> bool:
    """Whether `argv` is one of the questions `ask` may put (and a replay may put again)."""
    args = list(argv)
    if not args or Path(args[0]).name != "adb":
        return False
    return args[1:] == ["devices", "-l"] or (
        len(args) == 5 and args[1] == "-s" and args[3] == "shell"
        and _FILE_TEST.fullmatch(args[4]) is not None)


def ask(argv: Sequence[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    """`run` for a question that changes nothing (`is_question`: `adb devices -l`, a file
    test on the phone). Both audit events let a fully cached run be replayed only when the
    question, asked again, gets the same answer (run/replay.py); any other command keeps
    it from being replayed at all."""
    if not is_question(argv):
        raise ValueError(f"not a question adb.ask puts: {list(argv)}")
    sys.audit("edgebuild.ask", tuple(argv))
    answer = run(argv, timeout, what)
    sys.audit("edgebuild.answer", tuple(argv), answer.returncode, answer.stdout)
    return answer


@dataclass(frozen=True)
class Phone:
    """A usable phone: the adb to reach it and the device it is."""

    adb: Path
    device: AdbDevice

    def argv(self, *args: str) -> list[str]:
        """An adb command line addressed to this phone (`adb -s SERIAL ...`)."""
        return [str(self.adb), "-s", self.device.serial, *args]


def connect(serial: str | None, timeout: float = 30.0) -> Phone | str:
    """The phone to use (`serial`, else $ANDROID_SERIAL, else the only one attached), or
    a reason starting with "not measurable here:"."""
    adb = find_adb()
    if adb is None:
        return ("not measurable here: adb not found (not on PATH, not in "
                f"$ANDROID_HOME/platform-tools); install Android platform-tools ({PLATFORM_TOOLS})")
    try:
        listing = ask([str(adb), "devices", "-l"], timeout, "`adb devices -l`")
    except StageError as err:
        return f"not measurable here: {err.message}"
    if listing.returncode != 0:
        tail = (listing.stderr or listing.stdout).strip().splitlines()[-1:] or [""]
        return f"not measurable here: `adb devices -l` failed: {tail[0]}"
    chosen = select_device(parse_devices(listing.stdout),
                           serial or os.environ.get("ANDROID_SERIAL") or None)
    return chosen if isinstance(chosen, str) else Phone(adb, chosen)
