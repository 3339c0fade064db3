"""The fleet's CLI commands — `publish`, `promote`, `agent` — registered by edgebuild/cli.py.

Only argparse here: the work is imported when a command runs, so `edgebuild --help`
stays light (STYLE.md, tests/unit/test_light_imports.py).

Exit codes (docs/cli.md): publish/promote 0 done, 2 usage or bad input; agent 0 the
channel's release is active (activated now or already), 1 its health check failed and
the previous release was restored, 2 usage, 3 refused (a statement or blob failed
verification: nothing was activated).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edgebuild.errors import ExitCode


def add_parsers(sub: Any) -> None:
    """Add the fleet's sub-commands to the `edgebuild` parser's subparsers."""
    p = sub.add_parser("publish", help="publish a build's gated targets as OCI artifacts, "
                       "one index per release (docs/fleet.md)")
    p.add_argument("build", type=Path, help="the --out folder of `edgebuild run`")
    p.add_argument("--to", default="oci-layout:registry", metavar="REF",
                   help="oci-layout:DIR, an OCI image layout folder (default "
                        "oci-layout:registry), or http(s)://HOST[:PORT]/REPOSITORY, an OCI "
                        "registry (http only on loopback)")
    p.add_argument("--version", required=True, dest="release", metavar="V",
                   help="the release's tag; a tag is never moved to other content")
    p.add_argument("--allow-failed", action="store_true",
                   help="also publish targets whose gates failed (annotated "
                        "dev.edgebuild.gates.passed=false)")

    p = sub.add_parser("promote", help="sign a statement putting a release on a channel "
                       "and move the channel's tag (rollback: promote the previous one)")
    p.add_argument("ref", metavar="REF:V", help="the release to promote: oci-layout:DIR:V "
                   "or https://HOST/REPOSITORY:V")
    p.add_argument("channel", help="production, canary, …")
    p.add_argument("--key", type=Path, default=None, metavar="KEYFILE",
                   help="the Ed25519 private key to sign with (default: "
                        "$EDGEBUILD_SHARED_CACHE_KEY, else ~/.config/edgebuild/"
                        "shared-cache-key.pem; `edgebuild cache keygen` makes one)")
    p.add_argument("--expires-days", type=float, default=30.0, metavar="D",
                   help="the statement expires after D days: promote again before then "
                        "(default 30)")

    p = sub.add_parser("agent", help="the device side: pull the channel's release for a "
                       "target, verify, activate, health-check, roll back")
    p.add_argument("--from", dest="source", required=True, metavar="REF",
                   help="oci-layout:DIR, or http(s)://HOST[:PORT]/REPOSITORY (downloads "
                        "resume)")
    p.add_argument("--channel", required=True)
    p.add_argument("--target", required=True, help="the target this device is "
                   "(the dev.edgebuild.target annotation)")
    p.add_argument("--root", type=Path, required=True,
                   help="releases/, current -> the active one, state.json")
    p.add_argument("--trust", type=Path, action="append", required=True, metavar="KEYS",
                   help="a file of trusted public keys, one `ssh-ed25519 …` line each "
                        "(repeatable)")
    p.add_argument("--health-cmd", default=None, metavar="CMD",
                   help="also run this command in the new release's folder; non-zero "
                        "exit = unhealthy (env: EDGEBUILD_RELEASE, "
                        "EDGEBUILD_RELEASE_VERSION, EDGEBUILD_MODEL)")
    p.add_argument("--no-model-check", action="store_true",
                   help="skip the default check (load the model and run one inference "
                        "with edgebuild's runner for its backend)")
    p.add_argument("--keep", type=int, default=3, metavar="N",
                   help="releases kept on disk (default 3; the active and previous "
                        "always)")
    p.add_argument("--device-facts", type=Path, default=None, metavar="FILE",
                   help="TensorRT variants: this device's TensorRT version and compute "
                        "capability from a JSON file ({\"tensorrt_version\": \"10.3.0\", "
                        "\"compute_capability\": \"8.7\"}) instead of probing them "
                        "(also $EDGEBUILD_DEVICE_FACTS)")
    p.add_argument("--adb", nargs="?", const="", default=None, metavar="SERIAL",
                   help="the device is an Android phone reached from this host: push each "
                        "release with adb, check it there with sha256sum, activate it by a "
                        "rename (SERIAL: default $ANDROID_SERIAL, else the only phone)")
    p.add_argument("--device-dir", default=None, metavar="DIR",
                   help="with --adb: the phone's folder, under /data/local/tmp (default "
                        "/data/local/tmp/edgebuild/CHANNEL)")
    p.add_argument("--fetch-deadline", type=float, default=None, metavar="S",
                   help="each read from a registry (a tag, a record, a blob) is stopped "
                        "after S seconds, and the check refused (default 900; a download "
                        "stopped this way resumes at the next check)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="check once and exit (default)")
    when.add_argument("--interval", type=float, default=None, metavar="S",
                      help="check every S seconds until stopped")


def cmd_publish(args: argparse.Namespace) -> int:
    from edgebuild.fleet.publish import publish
    from edgebuild.fleet.remote import open_store

    store, _ = open_store(args.to, with_tag=False)
    done = publish(args.build, store, args.release, args.allow_failed)
    for target, descriptor in done.targets.items():
        print(f"  published {target:<20} {descriptor.digest}")
    for target, why in done.skipped.items():
        print(f"  skipped   {target:<20} {why}")
    print(f"{args.to}:{done.version} -> {done.index.digest} "
          f"({len(done.targets)} target(s), {done.new_blobs} new blob(s))")
    return ExitCode.OK


def cmd_promote(args: argparse.Namespace) -> int:
    from edgebuild.fleet.promote import promote
    from edgebuild.fleet.remote import open_store

    store, version = open_store(args.ref, with_tag=True)
    assert version is not None
    signed = promote(store, version, args.channel, args.key, args.expires_days)
    statement = signed.statement
    writer = signed.signature.writer if signed.signature else "?"
    print(f"{args.channel} -> {version} ({statement.index}), sequence "
          f"{statement.sequence}, expires {statement.expires}, signed by "
          f"{writer[:16]}…")
    return ExitCode.OK


def cmd_agent(args: argparse.Namespace) -> int:
    from edgebuild.fleet.agent import run_agent
    from edgebuild.fleet.agent_options import AgentOptions

    options = AgentOptions(source=args.source, channel=args.channel, target=args.target,
                           root=args.root, trust=args.trust, health_cmd=args.health_cmd,
                           model_check=not args.no_model_check, keep=args.keep,
                           interval=args.interval, device_facts=args.device_facts,
                           adb=args.adb, device_dir=args.device_dir,
                           **({"fetch_deadline": args.fetch_deadline}
                              if args.fetch_deadline is not None else {}))
    return run_agent(options)


COMMANDS = {"publish": cmd_publish, "promote": cmd_promote, "agent": cmd_agent}
