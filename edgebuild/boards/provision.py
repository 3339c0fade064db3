"""`edgebuild board setup aarch64`: an emulated ARM board, made once per machine.

A board is a folder: an aarch64 Debian userland (debian.py: Python 3.11 and the C
libraries, no package manager), the aarch64 wheels of what a board stage imports (the
same versions as this machine's environment, so the two differ in their kernels, not
their code), and `python`: a shell script that runs that Python under qemu-user::

    BOARDS/aarch64/<key>/python ─▶ qemu-aarch64-static -L root -0 python root/usr/bin/python3.11
                     ├ root/      usr/… (the .debs), usr/lib/python3/dist-packages (wheels),
                     │            proc/cpuinfo (an ARM CPU's: see FAKE_CPUINFO)
                     └ board.json what it holds: packages, wheels, set-up seconds and bytes

No root, chroot, sshd or binfmt_misc: qemu's `-L root` sends the emulated process's
absolute paths into `root` where a file exists there; `-0 python` makes the script the
process's `sys.executable`, so a stage process it starts runs emulated too (this
machine's kernel runs the script; it cannot run an ARM executable itself).

The key is a digest of everything asked for (the Debian suite and packages, each
wheel's name and version); a board is built in a hidden folder and renamed into place
whole, under a lock, so a half-made board is never used and two set-ups build it once.
Boards live per machine (BOARDS: $EDGEBUILD_BOARDS_DIR, else ~/.cache/edgebuild-boards),
not in the cache dir: a CI job in a fresh clone keeps its cache inside the clone, and
would pay the set-up again each time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from edgebuild.boards import debian
from edgebuild.errors import BoardError, EdgebuildError

BOARDS_ENV = "EDGEBUILD_BOARDS_DIR"
FORMAT = 1  # bump when what a board holds changes: every key changes with it
SUITE = "bookworm"  # Python 3.11, as edgebuild's own
PYTHON = "usr/bin/python3.11"
DEBS = ("python3.11-minimal", "libpython3.11-stdlib", "libstdc++6", "libgomp1")
# What a board stage imports (the worker, the op, a runner, the data it reads), with
# their requirements; a distribution this environment lacks is left out (LiteRT).
WHEEL_ROOTS = ("pydantic", "pyyaml", "numpy", "platformdirs", "filelock", "pillow",
               "networkx", "onnx", "onnxruntime", "ai-edge-litert")
SITE = "usr/lib/python3/dist-packages"  # on the board's sys.path (Debian's site.py)


@dataclass(frozen=True)
class Arch:
    name: str  # edgebuild's (a device's `arch`)
    debian: str
    qemu: str
    platforms: tuple[str, ...]  # pip --platform: every tag, as pip does not expand them
    cpu_part: str  # /proc/cpuinfo's identity (see FAKE_CPUINFO)


ARCHES = {"aarch64": Arch("aarch64", "arm64", "qemu-aarch64-static",
                          ("manylinux2014_aarch64", "manylinux_2_17_aarch64",
                           "manylinux_2_27_aarch64", "manylinux_2_28_aarch64", "any"),
                          "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                          "CPU part\t: 0xd08\nCPU revision\t: 3")}
# qemu 7.2 hands the emulated process this machine's /proc/cpuinfo (an x86 one), and
# ONNX Runtime's CPU detection (pytorch/cpuinfo) crashes on it (SIGSEGV at import).
# The board's root holds an ARM one, which `-L` reads instead: a Cortex-A72's identity
# (the Pi 4's); the instruction set features a runtime uses come from the emulated
# CPU's HWCAP (qemu's `-cpu`, a target's `runs_on.cpu`), not from this file.


@dataclass(frozen=True)
class Board:
    """A provisioned board: its folder, its Python (the qemu script), what it holds."""

    path: Path
    arch: str
    key: str
    info: dict[str, object]

    @property
    def python(self) -> Path:
        return self.path / "python"

    @property
    def root(self) -> Path:
        return self.path / "root"


def boards_dir() -> Path:
    if os.environ.get(BOARDS_ENV):
        return Path(os.environ[BOARDS_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("edgebuild-boards"))


def arch_of(name: str) -> Arch:
    if name not in ARCHES:
        raise EdgebuildError(f"no emulated board for arch {name!r}",
                             f"one of: {', '.join(ARCHES)}")
    return ARCHES[name]


def wheel_pins() -> dict[str, str]:
    """Each distribution a board stage imports, at this environment's version: the roots
    and their requirements (as they apply on Linux, Python 3.11), name → version."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "aarch64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": ""}
    pins: dict[str, str] = {}
    todo = list(WHEEL_ROOTS)
    while todo:
        name = _canonical(todo.pop())
        if name in pins:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        pins[name] = dist.version
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return dict(sorted(pins.items()))


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def board_key(arch: Arch, pins: dict[str, str]) -> str:
    asked = {"format": FORMAT, "arch": arch.name, "suite": SUITE, "debs": DEBS, "wheels": pins}
    return hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()


def find_board(arch_name: str) -> Board | None:
    """The board this environment's versions ask for, if it has been set up; no network."""
    arch = arch_of(arch_name)
    path = boards_dir() / arch.name / board_key(arch, wheel_pins())
    try:
        info = json.loads((path / "board.json").read_text())
    except (OSError, ValueError):
        return None
    return Board(path, arch.name, path.name, info)


def setup_board(arch_name: str, mirror: str = debian.DEFAULT_MIRROR,
                say: object = None) -> tuple[Board, bool]:
    """The board for `arch_name`, made if it is not there yet: (board, made now)."""
    from filelock import FileLock

    arch = arch_of(arch_name)
    qemu = shutil.which(arch.qemu)
    if qemu is None:
        raise BoardError(f"no {arch.qemu} on this machine: an emulated {arch.name} board "
                             "runs its Python under qemu-user",
                             "apt-get install qemu-user-static (scripts/setup.sh does it)")
    pins = wheel_pins()
    home = boards_dir() / arch.name
    home.mkdir(parents=True, exist_ok=True)
    final = home / board_key(arch, pins)
    with FileLock(str(home / ".setup.lock")):
        found = find_board(arch.name)
        if found is not None:
            return found, False
        work = Path(tempfile.mkdtemp(prefix=".partial-", dir=home))
        try:
            _build(arch, Path(qemu), pins, mirror, work, final, say)
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    board = find_board(arch.name)
    assert board is not None
    return board, True


def _build(arch: Arch, qemu: Path, pins: dict[str, str], mirror: str, work: Path,
           final: Path, say: object) -> None:
    def note(text: str) -> None:
        if callable(say):
            say(text)

    started = time.perf_counter()
    root = work / "root"
    note(f"Debian {SUITE} {arch.debian} packages from {mirror}")
    index = debian.packages_index(mirror, SUITE, arch.debian)
    debs = debian.closure(index, DEBS)
    debian.install(mirror, debs, root)
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "cpuinfo").write_text("".join(
        f"processor\t: {n}\nFeatures\t: fp asimd\n{arch.cpu_part}\n\n"
        for n in range(os.cpu_count() or 1)))
    note(f"{len(pins)} {arch.name} wheels (this environment's versions)")
    _wheels(arch, pins, root / SITE, work / "wheels")
    shutil.rmtree(work / "wheels")
    # Debian compiles its modules in a maintainer script, which never ran: compiled here
    # once (bytecode is the same for every 3.11), not by each emulated process.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "2",
                    str(root / "usr" / "lib" / "python3.11")], capture_output=True, check=False)
    # The script names the *final* folder: it is renamed there before anyone runs it.
    script = work / "python"
    script.write_text(f"#!/bin/sh\n# edgebuild's emulated {arch.name} board: its Python "
                      f"under qemu-user (`edgebuild board setup`).\nexec {_sh(str(qemu))} -L "
                      f"{_sh(str(final / 'root'))} -0 \"$0\" {_sh(str(final / 'root' / PYTHON))}"
                      " \"$@\"\n")
    script.chmod(0o755)
    info = {"format": FORMAT, "arch": arch.name, "suite": SUITE, "mirror": mirror,
            "qemu": str(qemu), "debs": {d.name: d.version for d in debs}, "wheels": pins,
            "setup_seconds": round(time.perf_counter() - started, 1),
            "bytes": sum(p.lstat().st_size for p in root.rglob("*"))}
    _smoke_test(work, final)
    (work / "board.json").write_text(json.dumps(info, indent=1) + "\n")


def _smoke_test(work: Path, final: Path) -> None:
    """The board's Python imports its runtimes (run from `work` through a script that
    names it: the real one names `final`, where the board is not yet)."""
    trial = work / "python.trial"
    trial.write_text((work / "python").read_text().replace(str(final), str(work)))
    trial.chmod(0o755)
    done = subprocess.run([str(trial), "-c", "import numpy, pydantic, onnxruntime"],
                          capture_output=True, text=True, timeout=600, check=False,
                          env=board_env({}))
    trial.unlink()
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise BoardError(f"the new board's Python cannot import its runtimes: "
                             f"{tail[:300]}", "the board was not kept; see docs/targets.md")


def board_env(extra: dict[str, str]) -> dict[str, str]:
    """This environment for a board's process, less what would lead an emulated Python to
    this machine's x86 packages (PYTHONPATH, a venv, the user's site-packages)."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "QEMU_LD_PREFIX"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "PYTHONNOUSERSITE": "1", **extra}


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _wheels(arch: Arch, pins: dict[str, str], site: Path, download: Path) -> None:
    """The aarch64 wheels of `pins`, exactly those versions and no others, under `site`."""
    tags = ["--only-binary=:all:", "--no-deps", "--python-version", "3.11",
            "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
            *(a for p in arch.platforms for a in ("--platform", p))]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wanted = [f"{name}=={version}" for name, version in pins.items()]
    _pip([*pip, "download", *tags, "-d", str(download), *wanted], arch, "download")
    _pip([*pip, "install", *tags, "--no-index", "--target", str(site),
          *map(str, sorted(download.glob("*.whl")))], arch, "install")


def _pip(command: list[str], arch: Arch, verb: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if "ERROR" in line][-1:] \
            or done.stderr.strip().splitlines()[-1:] or ["?"]
        raise BoardError(f"pip could not {verb} the {arch.name} wheels: {last[0][:300]}",
                             f"each pinned version needs an {arch.name} wheel for CPython "
                             "3.11 on PyPI")
