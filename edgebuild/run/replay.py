"""A fully cached `edgebuild run`, replayed when nothing it read has changed since.

A fully cached run builds and measures nothing, yet it still costs ~0.6–0.9 s: Python
imports pydantic and builds ~100 schema models, loads and checks the recipe, keys every
stage, looks each up and writes the report. Its account is a function of what it read
(files, folders, environment variables) and of the machine, so the first fully cached
run of a command writes down everything it observed, and the next run of the same
command that finds all of it unchanged prints that account again and exits with its
code, importing none of the above (0.1 s)::

    recording run   sys.addaudithook: "open", "os.listdir", "os.scandir", "os.rename", …
                    os.stat / os.lstat / os.access wrapped: existence probes (shutil.which)
                    os.environ reads (their value when the run started)
                    stdout / stderr teed
                    a process started, a socket opened ──▶ no record (a probe's answer
                    could differ next time: `adb devices`, a cluster)
                    a cache entry removed ("edgebuild.cache.remove": a noisy figure
                    forgotten) ──▶ no record (the next run measures it again)
                    a stage executed ──▶ no record (the next run may differ: it is cached)
         │ 0 stages executed, no exception
         ▼
    <cache>/replay/<key>.json     key: argv, cwd, interpreter, sys.path, CPU, terminal
         │
    next run: same key, every environment value read equal, every path's stat signature
              equal (inode, size, mtime and ctime; absent stays absent), every listed
              folder's too ──▶ the account printed again + one line saying so; else the
              normal run (and a new record when it is fully cached again)

What this relies on: every input of a cached run's answer is a file, a folder listing,
an environment variable, the command line or the machine, and the first four are seen
here. Code is files (every module imported, edgebuild's fingerprint reads its sources);
tool versions are files (their metadata); the device probes read files (`adb` on the
PATH) or start a process (no record then); the cache's entries and the memo's records
are files; the reports and `artifacts/` the run left are files (a deleted report is a
miss, and the run writes it again). Files under /proc, /sys and /dev are machine state
(load, memory) that a cached run reads but does not decide on; the CPU enters the key.

Only a process whose whole job is this command records or replays (`cli.main()` from
the console script, not `main(argv)` called in another program, whose monkeypatches
this cannot see). `--no-replay` or EDGEBUILD_NO_REPLAY=1 runs the check again.

The record lives in the local cache folder, written by this user's own runs; it is still
read as data (JSON, every field type-checked), and a record that does not read is a miss.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import stat
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

RECORD_VERSION = 1
REPLAY_DIR = "replay"
NO_REPLAY_ENV = "EDGEBUILD_NO_REPLAY"

# Audit events whose first argument(s) name a path the run read, wrote or probed.
_PATH_EVENTS = {"open": 1, "os.listdir": 1, "os.scandir": 1, "os.rename": 2, "os.remove": 1,
                "os.rmdir": 1, "os.mkdir": 1, "os.link": 2, "os.symlink": 2, "os.chmod": 1,
                "os.utime": 1, "os.truncate": 1, "shutil.rmtree": 1, "shutil.copyfile": 2,
                "shutil.copytree": 2, "shutil.move": 2}
_LISTING_EVENTS = {"os.listdir", "os.scandir"}  # glob and os.walk list through os.scandir
# Anything whose answer is not in a file: another process, the network, a database.
_SPOILING_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec",
                    "os.fork", "os.forkpty", "socket.connect", "socket.bind",
                    "socket.getaddrinfo", "urllib.Request", "sqlite3.connect", "os.chdir",
                    "os.startfile", "pty.spawn", "ctypes.dlopen"}
_MACHINE_STATE = ("/proc/", "/sys/", "/dev/")

Signature = list[int] | str | None  # a file's stat signature, "dir", or None: absent


def _signature(path: str, listed: bool) -> Signature:
    """What changes when a file's content can have changed; a folder's inode and mtime
    when its listing was read (an entry added or removed), else only that it is one."""
    try:
        st = os.stat(path)  # noqa: PTH116 (strings: ~1,200 of them per replay)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(st.st_mode):
        return [st.st_ino, st.st_mtime_ns] if listed else "dir"
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _cpu() -> str:
    """The CPU's model and instruction sets (a cached latency is this CPU's). Not
    cache/keys.py's host_cpu(): importing that module costs 40 ms (importlib.metadata),
    half of a replay."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""
    keep = ("model name", "flags", "Features", "CPU part", "Hardware")
    seen: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in keep and name not in seen:
            seen[name] = value.strip()
    return json.dumps(seen, sort_keys=True)


def key_of(cache_root: Path) -> str:
    """Everything besides files and environment that the run's account can depend on."""
    tty = [stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr)]
    columns = os.get_terminal_size(sys.stdout.fileno()).columns if tty[1] else 0
    uname = os.uname()
    data = {"v": RECORD_VERSION, "argv": sys.argv, "cwd": os.getcwd(),  # noqa: PTH109
            "exe": sys.executable,
            "python": sys.version, "path": sys.path, "cache": str(cache_root),
            "machine": [uname.sysname, uname.release, uname.version, uname.machine],
            "cpus": [os.cpu_count(), len(os.sched_getaffinity(0))], "cpu": _cpu(),
            "tty": tty, "columns": columns,
            "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("EDGEBUILD_"))}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class ReplayRecord:
    """What a fully cached run read and said. Crosses runs as JSON: `read` checks it."""

    exit_code: int
    when: str  # ISO time the recorded run ended
    seconds: float  # its wall time
    env: dict[str, str | None]  # every variable it read, its value then (None: unset)
    paths: dict[str, Signature]  # every path it touched or probed, its state at the end
    listed: list[str]  # the folders whose listing it read (their signature has the mtime)
    output: list[tuple[int, str]]  # (1 stdout | 2 stderr, text), in order
    asked: list[tuple[list[str], int, str]]  # questions to a device: argv, exit code, stdout
    env_names: list[str] | None  # every variable's name, when the run went through them all

    def to_json(self) -> str:
        return json.dumps({"version": RECORD_VERSION, **self.__dict__})

    @classmethod
    def read(cls, data: bytes) -> ReplayRecord | None:
        """The record in `data`, or None when it is not exactly one."""
        try:
            raw = json.loads(data)
            if not isinstance(raw, dict) or raw.get("version") != RECORD_VERSION:
                return None
            record = cls(exit_code=raw["exit_code"], when=raw["when"], seconds=raw["seconds"],
                         env=raw["env"], paths=raw["paths"], listed=raw["listed"],
                         output=[(int(s), t) for s, t in raw["output"]],
                         asked=[(argv, code, out) for argv, code, out in raw["asked"]],
                         env_names=raw["env_names"])
        except (ValueError, KeyError, TypeError):
            return None
        return record if record._well_typed() else None

    def _well_typed(self) -> bool:
        def sig(value: object) -> bool:
            return value is None or value == "dir" or (
                isinstance(value, list) and all(type(n) is int for n in value))

        return (type(self.exit_code) is int and isinstance(self.when, str)
                and isinstance(self.seconds, float | int)
                and isinstance(self.env, dict) and all(
                    isinstance(k, str) and (v is None or isinstance(v, str))
                    for k, v in self.env.items())
                and isinstance(self.paths, dict) and all(
                    isinstance(k, str) and sig(v) for k, v in self.paths.items())
                and isinstance(self.listed, list) and all(isinstance(p, str) for p in self.listed)
                and all(s in (1, 2) and isinstance(t, str) for s, t in self.output)
                and all(isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
                        and type(code) is int and isinstance(out, str)
                        for argv, code, out in self.asked)
                and (self.env_names is None or (isinstance(self.env_names, list) and all(
                    isinstance(n, str) for n in self.env_names))))

    def still_true(self) -> bool:
        """Whether every variable and path it read is as it was, and every question it
        asked a device (`adb devices -l`) gets the same answer again."""
        env = os.environ
        if any(env.get(name) != value for name, value in self.env.items()):
            return False
        if self.env_names is not None and sorted(env) != self.env_names:
            return False
        listed = set(self.listed)
        if any(_signature(path, path in listed) != sig for path, sig in self.paths.items()):
            return False
        return all(_answer(argv) == (code, out) for argv, code, out in self.asked)


def _answer(argv: list[str]) -> tuple[int, str] | None:
    """A device question asked again (devices/adb.py `ask`: it changes nothing). Only one
    of adb's questions is ever run: a record is data, and one that names another command
    is a miss, never a command line to execute."""
    import subprocess

    from edgebuild.devices.adb import is_question

    if not is_question(argv):
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode, done.stdout


def _record_path(cache_root: Path, key: str) -> Path:
    return cache_root / REPLAY_DIR / f"{key}.json"


def asked_not_to() -> bool:
    """$EDGEBUILD_NO_REPLAY set (to anything but 0): neither replay nor record."""
    return os.environ.get(NO_REPLAY_ENV, "").strip() not in ("", "0")


def replay(cache_root: Path) -> int | None:
    """Print the recorded account and return its exit code, when nothing it read has
    changed; None: run normally."""
    try:
        key = key_of(cache_root)
        record = ReplayRecord.read(_record_path(cache_root, key).read_bytes())
    except OSError:
        return None
    if record is None or not record.still_true():
        return None
    streams = {1: sys.stdout, 2: sys.stderr}
    for stream, text in record.output:
        streams[stream].write(text)
        if stream == 2:
            streams[stream].flush()
    sys.stdout.flush()
    print(f"edgebuild: nothing this run reads changed since the fully cached run of "
          f"{record.when}; its account is replayed above (--no-replay checks the cache "
          f"again)", file=sys.stderr)
    return record.exit_code


class _Tee:
    """A text stream that also keeps what is written to it, in one shared order."""

    def __init__(self, stream: TextIO, number: int, recorder: Recorder) -> None:
        self._stream, self._number, self._recorder = stream, number, recorder

    def write(self, text: str) -> int:
        if self._recorder.active:  # a logging handler may keep this stream after the run
            self._recorder.output.append((self._number, text))
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@dataclass
class Recorder:
    """Watches this process from `start` on; `save` writes what it saw, unless spoiled."""

    cache_root: Path
    key: str
    env_at_start: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    paths: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    env: dict[str, str | None] = field(default_factory=dict)
    output: list[tuple[int, str]] = field(default_factory=list)
    scanned: set[str] = field(default_factory=set)  # os.scandir'ed: entries' stat seen too
    asking: list[tuple[str, ...]] = field(default_factory=list)  # asked, not yet answered
    asked: list[tuple[list[str], int, str]] = field(default_factory=list)
    spoiled: str = ""
    env_walked: bool = False  # os.environ iterated: a new variable counts too (`new_env`)
    active: bool = True
    _undo: list[Callable[[], None]] = field(default_factory=list)

    def note(self, path: object, listing: bool = False) -> str | None:
        """Keep `path` (absolute, as given: never resolved); its absolute form, or None
        for what is not a path (a descriptor: opened by path before) or machine state."""
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return None
        path = os.path.abspath(path)  # noqa: PTH100 (never resolve: a symlink's own path)
        if path.startswith(_MACHINE_STATE):
            return None
        self.paths.add(path)
        if listing:
            self.listed.add(path)
        return path

    def spoil(self, why: str) -> None:
        if self.active:
            self.spoiled, self.active = why, False
            self.stop()

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if event == "edgebuild.ask":
            self.asking.append(tuple(args[0]))
        elif event == "edgebuild.answer":
            argv, code, stdout = args
            self.asking.remove(tuple(argv))
            self.asked.append(([str(a) for a in argv], int(code), str(stdout)))
        elif event == "edgebuild.cache.remove":  # a figure forgotten: the next run times it
            self.spoil("a cache entry removed: the next run builds it again")
        elif event == "subprocess.Popen" and tuple(args[1]) in self.asking:
            return  # the question asked: its answer is kept and asked again on replay
        elif event in _SPOILING_EVENTS or event.startswith("os.exec"):
            self.spoil(event)
        elif count := _PATH_EVENTS.get(event):
            listing = event in _LISTING_EVENTS
            for path in args[:count]:
                noted = self.note("." if path is None and listing else path, listing)
                if noted is not None and event == "os.scandir":
                    self.scanned.add(noted)

    def start(self) -> None:
        """Watch from now on: the audit hook (once per process), os.stat and friends,
        os.environ's reads, stdout and stderr."""
        global _HOOKED
        _CURRENT[0] = self
        if not _HOOKED:
            sys.addaudithook(_dispatch)
            _HOOKED = True
        for name in ("stat", "lstat", "access"):
            self._wrap(os, name, self._probe(getattr(os, name)))
        environ_class = type(os.environ)
        self._wrap(environ_class, "__getitem__", self._env_read(environ_class.__getitem__))
        self._wrap(environ_class, "__iter__", self._env_walk(environ_class.__iter__))
        self._wrap(sys, "stdout", _Tee(sys.stdout, 1, self))
        self._wrap(sys, "stderr", _Tee(sys.stderr, 2, self))

    def _wrap(self, owner: Any, name: str, new: Any) -> None:
        old = getattr(owner, name)
        setattr(owner, name, new)
        self._undo.append(lambda: setattr(owner, name, old))

    def _probe(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def probe(path: Any, *args: Any, **kwargs: Any) -> Any:
            if self.active:
                if kwargs.get("dir_fd") is not None:
                    self.spoil("a path relative to a folder descriptor")
                else:
                    self.note(path)
            return real(path, *args, **kwargs)

        return probe

    def _env_read(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def getitem(environ: Any, name: str) -> Any:
            if self.active and environ is os.environ and isinstance(name, str):
                self.env.setdefault(name, self.env_at_start.get(name))
            return real(environ, name)

        return getitem

    def _env_walk(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def walk(environ: Any) -> Any:
            if self.active and environ is os.environ:  # every name read: all of them count
                for name in self.env_at_start:
                    self.env.setdefault(name, self.env_at_start[name])
                self.env_walked = True
            return real(environ)

        return walk

    def stop(self) -> None:
        """Stop watching (the audit hook stays, idle: Python cannot remove one)."""
        if _CURRENT[0] is self:
            _CURRENT[0] = None
        while self._undo:
            self._undo.pop()()

    def save(self, exit_code: int, seconds: float) -> None:
        """Write the record, unless something spoiled it; the run's own state is final."""
        if not self.active or self.asking:  # a question with no answer: it failed
            return
        self.active = False
        self.stop()
        for folder in self.scanned:  # a file changed in place leaves its folder's mtime
            with contextlib.suppress(OSError), os.scandir(folder) as entries:
                for entry in entries:
                    self.note(entry.path)
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str):
                self.note(filename)
        paths = {path: _signature(path, path in self.listed) for path in sorted(self.paths)}
        record = ReplayRecord(
            exit_code=exit_code, when=dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            seconds=round(seconds, 3), env=dict(sorted(self.env.items())), paths=paths,
            listed=sorted(self.listed), output=_merged(self.output), asked=self.asked,
            env_names=sorted(self.env_at_start) if self.env_walked else None)
        target = _record_path(self.cache_root, self.key)
        with contextlib.suppress(OSError):
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
            part.write_text(record.to_json())
            part.replace(target)


def _merged(output: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Consecutive writes to one stream as one (print writes the text, then its end)."""
    merged: list[tuple[int, str]] = []
    for stream, text in output:
        if merged and merged[-1][0] == stream:
            merged[-1] = (stream, merged[-1][1] + text)
        else:
            merged.append((stream, text))
    return merged


_CURRENT: list[Recorder | None] = [None]
_HOOKED = False


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    recorder = _CURRENT[0]
    if recorder is None:
        return
    try:
        recorder._audit(event, args)
    except Exception:  # an event read wrongly must never fail the operation it audits
        recorder.spoil(f"an audit event not understood: {event}")


@contextlib.contextmanager
def recording(cache_root: Path) -> Iterator[Recorder]:
    """A recorder watching the block; the caller saves it when the run was fully cached.
    It stops watching when the block ends, whatever happened."""
    recorder = Recorder(cache_root, key_of(cache_root))
    with contextlib.suppress(OSError):  # before the run: its parent's listing stays as seen
        (cache_root / REPLAY_DIR).mkdir(parents=True, exist_ok=True)
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.active = False
        recorder.stop()


def clean_records(cache_root: Path, older_than: float) -> int:
    """`edgebuild cache gc`: remove the records last written before `older_than`."""
    removed = 0
    for record in (cache_root / REPLAY_DIR).glob("*.json"):
        with contextlib.suppress(OSError):
            if record.stat().st_mtime < older_than:
                record.unlink()
                removed += 1
    return removed
