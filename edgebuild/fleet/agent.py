"""`edgebuild agent`: the device side. One check:

    channel tag ─► statement ── verify (trusted key, channel, expiry, sequence > ours)
        └─► release index ─► the manifest whose dev.edgebuild.target is ours
              └─► every layer copied through sha256 + size into releases/.staging-…
                    (a file a kept release already has is copied from there, verified)
                    ─► rename to releases/<manifest hex> ─► swap `current` ─► health
                          check ─► healthy: keep; unhealthy: swap back (rollback)

Anything refused (unsigned, unknown key, expired, downgrade or replay, a blob that is
not its digest, a name that leaves its folder) stops the check before `current`
moves: nothing is activated, and state.json says why. Imports: the standard library,
pydantic and `cryptography` (statement.py); the model check runs in a subprocess.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from edgebuild.cache.signing import Trust
from edgebuild.core.manifest import (
    MANIFEST_NAME,
    read_manifest,
)
from edgebuild.errors import EdgebuildError, ExitCode, printable
from edgebuild.fleet import health
from edgebuild.fleet.agent_options import AgentOptions, Outcome, Refused
from edgebuild.fleet.download import replace_dir, stage
from edgebuild.fleet.layout import Store
from edgebuild.fleet.records import (
    MANIFEST,
    STATEMENT_ARTIFACT,
    STATEMENT_LAYER,
)
from edgebuild.fleet.remote import open_store
from edgebuild.fleet.state import (
    AgentState,
    Release,
    load_state,
    save_state,
)
from edgebuild.fleet.statement import SignedStatement, parse, refusal, trust_from

if TYPE_CHECKING:
    from edgebuild.fleet.android import PhoneDeployer

CURRENT: Final = "current"
HEALTH_TIMEOUT_S = 600.0


def run_agent(options: AgentOptions) -> int:
    """--once (default): one check, its exit code; --interval S: check until stopped."""
    if options.keep < 2:
        raise EdgebuildError(f"--keep {options.keep}: at least 2 (the active release and "
                             "the one to roll back to)")
    if options.device_dir is not None:
        if options.adb is None:
            raise EdgebuildError("--device-dir is the phone's folder: it needs --adb")
        from edgebuild.fleet.android import remote_dir

        remote_dir(options.device_dir)  # a usage error (exit 2), before any download
    if options.interval is not None and not options.interval > 0:
        raise EdgebuildError(f"--interval {options.interval:g}: seconds > 0")
    if not 0 < options.fetch_deadline <= 7 * 86400:
        raise EdgebuildError(f"--fetch-deadline {options.fetch_deadline:g}: seconds, more "
                             "than 0 and at most a week")
    open_store(options.source, with_tag=False)  # usage errors (exit 2) before any round
    trust_from(options.trust)
    while True:
        outcome = _round(options)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(f"{stamp} {printable(outcome.message)}", flush=True)
        if options.interval is None:
            return outcome.code
        time.sleep(options.interval)


def _round(options: AgentOptions) -> Outcome:
    """One check as an outcome. --once: an error is the command's (exit 2, or 4 for a
    bug). --interval: a round that fails is logged as one line and the agent keeps
    polling (a hostile mirror must not stop it)."""
    if options.interval is None:
        return check_once(options)
    try:
        return check_once(options)
    except EdgebuildError as exc:
        return Outcome(code=int(exc.exit_code), message=f"error: {exc.message}; next "
                       f"check in {options.interval:g} s")
    except Exception as exc:  # a bug in a daemon: logged, the next round still runs
        first = (str(exc).splitlines() or [""])[0][:300]
        return Outcome(code=ExitCode.INTERNAL, message=f"internal error: "
                       f"{type(exc).__name__}: {first}; next check in {options.interval:g} s")


def check_once(options: AgentOptions, now: dt.datetime | None = None) -> Outcome:
    """One check of the channel; state.json records what happened."""
    root = options.root
    root.mkdir(parents=True, exist_ok=True)
    (root / "releases").mkdir(exist_ok=True)
    with _locked(root):
        state = load_state(root, options.target, options.channel)
        try:
            state, outcome = _check(options, state, now or dt.datetime.now(dt.UTC))
        except Refused as exc:
            state = state.with_event("refused", exc.message)
            outcome = Outcome(code=ExitCode.STAGE_FAILED, message=f"refused: {exc.message}")
        save_state(root, state)
    return outcome


def _check(options: AgentOptions, state: AgentState,
           now: dt.datetime) -> tuple[AgentState, Outcome]:
    layout, _ = open_store(options.source, with_tag=False, deadline_s=options.fetch_deadline)
    trust = trust_from(options.trust)
    signed = _verified_statement(layout, options.channel, trust, now)
    statement = signed.statement
    active = state.active
    if statement.sequence <= state.sequence:
        if statement.sequence == state.sequence and active and active.index == statement.index:
            # No event: a device checking every minute would push out the history.
            return state.model_copy(update={"checked": now}), Outcome(
                code=ExitCode.OK, message=f"up to date: {active.version} (sequence "
                                          f"{statement.sequence})")
        if statement.sequence == state.sequence and state.events and \
                state.events[-1].action in ("rolled-back", "unhealthy"):
            return state, Outcome(code=ExitCode.GATE_FAILED, message=(
                f"{statement.version} failed its health check; waiting for a newer "
                "promotion"))
        raise Refused(f"the channel's statement (sequence {statement.sequence}, "
                      f"{statement.version}, issued {statement.issued.isoformat()}) is older "
                      f"than sequence {state.sequence}, the one this device acted on: a "
                      "rewound channel tag, a downgrade or a replay",
                      "promote again (a rollback is a new statement with a higher "
                      "sequence); check who can write the store")
    if active is not None and active.index == statement.index:
        reason = f"{active.version} renewed by sequence {statement.sequence}"
        return state.with_event("renewed", reason, active.version, statement.sequence,
                                sequence=statement.sequence), Outcome(
            code=ExitCode.OK, message=reason)
    release = stage(layout, signed, options, state)
    return _activate(options, state, release)


def _verified_statement(layout: Store, channel: str, trust: Trust,
                        now: dt.datetime) -> SignedStatement:
    try:
        tagged = layout.resolve(channel)
        if tagged.artifact_type != STATEMENT_ARTIFACT or tagged.media_type != MANIFEST:
            raise Refused(f"channel {channel!r} names no signed statement (a "
                          f"{tagged.artifact_type or tagged.media_type}): unsigned")
        record = layout.manifest(tagged)
        blobs = [d for d in record.layers if d.media_type == STATEMENT_LAYER]
        if len(blobs) != 1:
            raise Refused(f"channel {channel!r}: the statement artifact holds "
                          f"{len(blobs)} statements, not one")
        signed = parse(layout.read_blob(blobs[0]), f"channel {channel}")
    except Refused:
        raise
    except EdgebuildError as exc:
        raise Refused(exc.message, exc.hint) from None
    why = refusal(signed, trust, channel, now)
    if why:
        raise Refused(why)
    if record.subject is not None and record.subject.digest != signed.statement.index:
        raise Refused("the statement's subject is another release than the one it signs")
    return signed


def _activate(options: AgentOptions, state: AgentState,
              release: Release) -> tuple[AgentState, Outcome]:
    root = options.root
    before = state.active
    phone = _phone(options)
    if phone is not None:
        try:  # pushed, checked on the phone and renamed there before anything moves
            phone.deploy(root / "releases" / release.folder / "files",
                         read_manifest(root / "releases" / release.folder / MANIFEST_NAME),
                         release.folder)
            phone.activate(release.folder)
        except EdgebuildError as exc:
            raise Refused(f"adb: {exc.message}", exc.hint) from None
    swap(root, release.folder)
    ok, why = health_check(root.absolute() / CURRENT, release, options)
    kept = [*[k for k in state.kept if k != release.folder], release.folder]
    if not ok:
        if before is not None:
            swap(root, before.folder)
            reason = f"{release.version} failed its health check ({why}); rolled back " \
                     f"to {before.version}"
        else:
            (root / CURRENT).unlink(missing_ok=True)
            reason = f"{release.version} failed its health check ({why}); nothing active"
        if phone is not None:
            reason += _phone_rollback(phone, before)
        state = state.with_event("rolled-back" if before else "unhealthy", reason,
                                 release.version, release.sequence,
                                 sequence=release.sequence, kept=kept)
        return _prune(root, state, options.keep, phone), Outcome(code=ExitCode.GATE_FAILED,
                                                          message=reason)
    engine = f"{release.engine}; " if release.engine else ""
    reason = f"{release.version} activated (sequence {release.sequence}; {engine}{why}; " \
             f"{release.downloaded_bytes} bytes downloaded, {release.reused_bytes} reused)"
    state = state.with_event("activated", reason, release.version, release.sequence,
                             active=release, previous=before, sequence=release.sequence,
                             reason=reason, kept=kept)
    return _prune(root, state, options.keep, phone), Outcome(code=ExitCode.OK, message=reason)


def _phone(options: AgentOptions) -> PhoneDeployer | None:
    """The phone to push to (--adb), or None: the agent's own machine is the device."""
    if options.adb is None:
        return None
    from edgebuild.fleet.android import PhoneDeployer

    folder = options.device_dir or f"/data/local/tmp/edgebuild/{options.channel}"
    try:
        return PhoneDeployer(options.adb or None, folder)
    except EdgebuildError as exc:
        raise Refused(f"adb: {exc.message}", exc.hint) from None


def _phone_rollback(phone: PhoneDeployer, before: Release | None) -> str:
    try:
        if before is not None:
            phone.activate(before.folder)
        else:
            phone.deactivate()
    except EdgebuildError as exc:
        return f"; the phone could not follow: {exc.message}"
    return f"; on {phone.where} too"


def swap(root: Path, folder: str) -> None:
    """Point ROOT/current at releases/<folder>: a new symlink renamed over the old one
    (rename(2) is atomic: a reader sees the old release or the new one)."""
    link = root / f".{CURRENT}-{uuid.uuid4().hex[:8]}"
    link.symlink_to(Path("releases") / folder)
    link.replace(root / CURRENT)


def health_check(current: Path, release: Release, options: AgentOptions) -> tuple[bool, str]:
    """(healthy, what was checked): the model check (unless --no-model-check), then
    --health-cmd; a check that cannot run here is skipped and says so."""
    notes: list[str] = []
    # The check imports the same edgebuild as this process, wherever it is installed.
    package = str(Path(health.__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "EDGEBUILD_RELEASE": str(current),
           "EDGEBUILD_RELEASE_VERSION": release.version,
           "EDGEBUILD_MODEL": str(_model_path(current, release))}
    if options.model_check:
        code, line = _run([sys.executable, "-m", "edgebuild.fleet.health", str(current)],
                          current, env)
        if code == health.SKIPPED:
            notes.append(f"model check skipped: {line}")
        elif code != health.HEALTHY:
            return False, f"model check: {line}"
        else:
            notes.append(f"model check: {line}")
    if options.health_cmd:
        code, line = _run(shlex.split(options.health_cmd), current, env)
        if code != 0:
            return False, f"--health-cmd exited {code}" + (f": {line}" if line else "")
        notes.append("--health-cmd passed")
    return True, "; ".join(notes) or "no health check (--no-model-check, no --health-cmd)"


def _model_path(current: Path, release: Release) -> Path:
    """The model the device runs: an engine built here (jetson.py), else the main file."""
    built = current / "engine" / "model.engine"
    return built if release.engine and built.is_file() else current / "files" / release.main


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=HEALTH_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)[:300]
    # The check's own line is stdout's last; a runtime's log goes to stderr (TFLite's
    # "INFO: Created TensorFlow Lite XNNPACK delegate" came last when they were joined).
    lines = done.stdout.strip().splitlines() or done.stderr.strip().splitlines()
    return done.returncode, (lines[-1][:300] if lines else "")


def _prune(root: Path, state: AgentState, keep: int,
           phone: PhoneDeployer | None = None) -> AgentState:
    """Keep the newest `keep` release folders, and always the active and previous (on
    the phone too, with --adb)."""
    pinned = {r.folder for r in (state.active, state.previous) if r is not None}
    kept = list(state.kept)
    while len(kept) > keep:
        drop = next((k for k in kept if k not in pinned), None)
        if drop is None:
            break
        kept.remove(drop)
        replace_dir(root / "releases" / drop)
        if phone is not None:
            with contextlib.suppress(EdgebuildError):  # a leftover folder, not a failure
                phone.remove(drop)
    return state.model_copy(update={"kept": kept})


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One agent per root at a time (an advisory lock on ROOT/.lock)."""
    import fcntl

    with (root / ".lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EdgebuildError(f"another agent is working on {root}") from None
        yield
