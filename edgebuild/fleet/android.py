"""An Android phone without Python: the agent runs on a host and pushes with adb.

    host agent (verify, stage in ROOT/releases/<hex>) ─► adb push into
    DIR/releases/.staging-<hex>/ ─► `sha256sum` on the phone (every file, against the
    manifest) ─► mv to DIR/releases/<hex> ─► activation: a new symlink renamed over
    DIR/current (`ln -sfn` + `mv -fT`: a rename, atomic) ─► health check on the host (and
    --health-cmd, which can `adb shell` the app) ─► unhealthy: current renamed back

DIR is under /data/local/tmp (writable by `adb shell` on every Android version) and is
checked like every name that reaches the phone: a remote path is built from
confined, validated parts only, and every word of a shell command is quoted
(`adb shell` hands the phone's sh one string). `adb push` takes its remote path
verbatim (the sync protocol, not a shell). Everything about reaching the phone
(finding adb, picking the phone, its state) is edgebuild/devices/adb.py's.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from edgebuild.core.manifest import ArtifactManifest
from edgebuild.devices.adb import DEVICE_DIR, Phone, connect, run
from edgebuild.errors import EdgebuildError, StageError

PUSH_TIMEOUT_S = 600.0
SHELL_TIMEOUT_S = 120.0
_PART: Final = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9._+-]{0,254}$")  # not "-x": no option


def remote_dir(value: str) -> str:
    """The phone's folder for this agent: an absolute path under /data/local/tmp made of
    plain names (no `..`, no shell metacharacters); else an EdgebuildError."""
    parts = value.rstrip("/").split("/")
    base = DEVICE_DIR.split("/")
    if parts[:len(base)] != base or len(parts) == len(base) or \
            not all(_PART.fullmatch(p) and p not in (".", "..") for p in parts[len(base):]):
        raise EdgebuildError(f"--device-dir {value!r}: not a folder under {DEVICE_DIR}/ "
                             "made of plain names (letters, digits, . _ + -)",
                             f"e.g. {DEVICE_DIR}/edgebuild/production")
    return "/".join(parts)


def remote_path(base: str, name: str) -> str:
    """base/name for a file name from a (verified) manifest: each part a plain name, the
    result inside `base`. The phone's shell and sync never see `..`, `/x` or a newline."""
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") or not _PART.fullmatch(p) for p in parts):
        raise EdgebuildError(f"file name {name!r} cannot go to the phone: only plain names "
                             "(letters, digits, . _ + -) in folders")
    joined = posixpath.join(base, *parts)
    assert posixpath.normpath(joined).startswith(base + "/")
    return joined


def shell(phone: Phone, *words: str) -> list[str]:
    """`adb -s SERIAL shell 'w1' 'w2' …`: one quoted command string for the phone's sh."""
    return phone.argv("shell", " ".join(shlex.quote(w) for w in words))


def shell_and(phone: Phone, *commands: Sequence[str]) -> list[str]:
    """Several commands joined with && (each word quoted) in one `adb shell`."""
    line = " && ".join(" ".join(shlex.quote(w) for w in c) for c in commands)
    return phone.argv("shell", line)


class Commands:
    """The adb command lines for one phone and folder (built, not run: unit-tested)."""

    def __init__(self, phone: Phone, base: str) -> None:
        self.phone, self.base = phone, remote_dir(base)

    def release(self, folder: str) -> str:
        return remote_path(self.base, f"releases/{folder}")

    def staging(self, folder: str) -> str:
        return remote_path(self.base, f"releases/.staging-{folder}")

    def prepare(self, folder: str, names: Sequence[str]) -> list[str]:
        """A clean staging folder with every subfolder the files need."""
        staging = self.staging(folder)
        folders = sorted({posixpath.dirname(remote_path(staging, n)) for n in names})
        return shell_and(self.phone, ["rm", "-rf", staging], ["mkdir", "-p", *folders])

    def push(self, local: Path, folder: str, name: str) -> list[str]:
        return self.phone.argv("push", str(local), remote_path(self.staging(folder), name))

    def sums(self, folder: str, names: Sequence[str]) -> list[str]:
        staging = self.staging(folder)
        return shell_and(self.phone, ["cd", staging],
                         ["sha256sum", "--", *[remote_path(staging, n)[len(staging) + 1:]
                                               for n in names]])

    def rename(self, folder: str) -> list[str]:
        final = self.release(folder)
        return shell_and(self.phone, ["rm", "-rf", final], ["mv", self.staging(folder), final])

    def activate(self, folder: str) -> list[str]:
        """current -> releases/<folder>: a new symlink renamed over the old one."""
        link = remote_path(self.base, ".current-new")
        return shell_and(self.phone, ["ln", "-sfn", f"releases/{folder}", link],
                         ["mv", "-fT", link, remote_path(self.base, "current")])

    def deactivate(self) -> list[str]:
        return shell(self.phone, "rm", "-f", remote_path(self.base, "current"))

    def remove(self, folder: str) -> list[str]:
        return shell(self.phone, "rm", "-rf", self.release(folder))


def parse_sums(text: str) -> dict[str, str]:
    """`sha256sum` output (toybox and coreutils: "<hex>  <name>") -> name -> hex."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([0-9a-f]{64}) [ *](.+)", line.strip())
        if match:
            found[match.group(2)] = match.group(1)
    return found


def mismatch(manifest: ArtifactManifest, sums: dict[str, str]) -> str | None:
    """Why the files on the phone are not the manifest's (None: they are)."""
    missing = [f.name for f in manifest.files if f.name not in sums]
    wrong = [f.name for f in manifest.files if f.name in sums and sums[f.name] != f.sha256]
    if missing:
        return f"not on the phone after the push: {', '.join(missing[:5])}"
    if wrong:
        return f"other bytes on the phone than the manifest's: {', '.join(wrong[:5])}"
    return None


class PhoneDeployer:
    """Runs Commands on a connected phone; every failure is an EdgebuildError."""

    def __init__(self, serial: str | None, base: str) -> None:
        base = remote_dir(base)  # a bad --device-dir is a usage error before adb is asked
        found = connect(serial)
        if isinstance(found, str):
            raise EdgebuildError(found.replace("not measurable here: ", "cannot push to "
                                               "the phone: "),
                                 "attach the phone (USB debugging on), or pass --adb SERIAL")
        self.commands = Commands(found, base)
        self.where = f"{found.device.describe()}:{base}"

    def _run(self, argv: list[str], what: str, timeout: float = SHELL_TIMEOUT_S) -> str:
        try:
            done = run(argv, timeout, what)
        except StageError as exc:
            raise EdgebuildError(exc.message, exc.hint) from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise EdgebuildError(f"{what} on {self.where} failed (exit {done.returncode}): "
                                 f"{tail[0][:300]}")
        return done.stdout

    def deploy(self, files: Path, manifest: ArtifactManifest, folder: str) -> None:
        """Push the release's files, check every byte on the phone, rename into place."""
        names = [f.name for f in manifest.files]
        self._run(self.commands.prepare(folder, names), "preparing the release folder")
        for name in names:
            self._run(self.commands.push(files / name, folder, name), f"adb push {name}",
                      PUSH_TIMEOUT_S)
        why = mismatch(manifest, parse_sums(self._run(self.commands.sums(folder, names),
                                                      "sha256sum")))
        if why:
            raise EdgebuildError(f"{self.where}: {why}")
        self._run(self.commands.rename(folder), "renaming the release into place")

    def activate(self, folder: str) -> None:
        self._run(self.commands.activate(folder), "activating the release")

    def deactivate(self) -> None:
        self._run(self.commands.deactivate(), "removing the current link")

    def remove(self, folder: str) -> None:
        self._run(self.commands.remove(folder), "removing an old release")
