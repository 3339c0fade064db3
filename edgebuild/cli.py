"""The `edgebuild` command: parse arguments, call `edgebuild.api`, map errors to exit codes.

Kept thin and light: no vendor framework is imported to show help, validate,
plan, or finish a fully cached run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from edgebuild import __version__
from edgebuild.boards import commands as boards  # `edgebuild board` (argparse only)
from edgebuild.cli_cache import cmd_cache
from edgebuild.core.redact import redact
from edgebuild.errors import EdgebuildError, ExitCode, did_you_mean, printable
from edgebuild.execute.logs import _OneLine
from edgebuild.fleet import commands as fleet  # publish, promote, agent (argparse only)
from edgebuild.run import profile as profiling  # `edgebuild profile` (argparse only)
from edgebuild.run.progress import ProgressPrinter, one_line  # noqa: F401 (cli.one_line)

if TYPE_CHECKING:
    from edgebuild.execute.cluster import ClusterSpec
    from edgebuild.report.model import SearchReport
    from edgebuild.run.replay import Recorder

    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

EPILOG = """exit codes: 0 all gates passed, 1 a gate failed, 2 invalid recipe or usage,
3 a stage failed, 4 internal error. Docs: docs/cli.md"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgebuild", description="Build, measure and gate ML models for edge hardware.",
        epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"edgebuild {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_run, _add_compare, _add_plan, _add_worker, _add_validate, _add_schema,
                _add_listings, _add_cache, fleet.add_parsers, profiling.add_parser,
                boards.add_parser):
        add(sub)
    return parser


def _with_targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", default=None, metavar="NAME",
                   help="only this target and the stages it needs (repeatable; shell "
                        "globs like 'host-*')")


def _with_tls(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-ca", type=Path, default=None, metavar="PEM",
                   help="the CA that signs every member of the cluster (mutual TLS; "
                        "default: Dask's distributed.comm.tls config)")
    p.add_argument("--tls-cert", type=Path, default=None, metavar="PEM",
                   help="this machine's certificate, signed by --tls-ca")
    p.add_argument("--tls-key", type=Path, default=None, metavar="PEM",
                   help="its private key (if not in --tls-cert)")
    p.add_argument("--insecure", action="store_true",
                   help="allow plain tcp:// to another machine: anyone who reaches the "
                        "scheduler can run code in every worker and in this process")


def _with_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="artifact cache (default: $EDGEBUILD_CACHE_DIR or ~/.cache/edgebuild)")


def _with_trust(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shared-cache-trust", action="append", default=None,
                   metavar="KEYFILE|any",
                   help="accept shared-cache entries signed by the public keys in this "
                        "file (repeatable; your own key and "
                        "~/.config/edgebuild/shared-cache-trusted.pub always count), or "
                        "`any` for a store only you can write: unsigned entries too, "
                        "never reference outputs (default: "
                        "$EDGEBUILD_SHARED_CACHE_TRUST, os.pathsep-separated)")
    p.add_argument("--shared-cache-key", type=Path, default=None, metavar="KEYFILE",
                   help="the Ed25519 private key this machine signs its uploads with "
                        "(default: $EDGEBUILD_SHARED_CACHE_KEY, else "
                        "~/.config/edgebuild/shared-cache-key.pem, made on first use)")


def _add_run(sub: Subparsers) -> None:
    p = sub.add_parser("run", help="build every target of a recipe and gate it")
    p.add_argument("recipe", type=Path)
    p.add_argument("--out", type=Path, default=None,
                   help="report and artifact folder (default: build/<recipe name>)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="stages run in parallel")
    p.add_argument("--keep-going", action="store_true",
                   help="after a failed stage, still run everything that does not depend on it")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--no-replay", action="store_true",
                   help="look every stage up again even when nothing the last fully cached "
                        "run of this command read has changed (its account is replayed "
                        "otherwise, in 0.1 s; also $EDGEBUILD_NO_REPLAY=1; "
                        "docs/performance.md)")
    p.add_argument("--ci", action=argparse.BooleanOptionalAction, default=None,
                   help="a log for CI: one plain line per event (no carriage return, no "
                        "progress bar in the stage logs either) and the report paths at the "
                        "end as `edgebuild: summary.md: PATH` lines (default: on when $CI is "
                        "true, as GitHub Actions and GitLab CI set it)")
    p.add_argument("--baseline", type=Path, default=None, metavar="REPORT",
                   help="report.json of an earlier run: also time its artifacts against "
                        "these, interleaved, and gate on the regression")
    p.add_argument("--cluster", default=None, metavar="SPEC",
                   help="run stages on Dask: local[:N] (a loopback cluster, TLS with a "
                        "one-run certificate) or tls://HOST:PORT (default: "
                        "$EDGEBUILD_CLUSTER, else this machine)")
    _with_tls(p)
    p.add_argument("--shared-cache", default=None, metavar="URL",
                   help="a store other machines share, any fsspec URL (a folder, sftp://, "
                        "s3://…): a local miss is fetched from it, a build is uploaded to it "
                        "(default: $EDGEBUILD_SHARED_CACHE); entries are signed, and only "
                        "trusted writers' are used (docs/distributed.md)")
    _with_trust(p)
    _with_targets(p)
    p.add_argument("--resource-timeout", type=float, default=60.0, metavar="S",
                   help="with --cluster: how long a device stage waits for a worker "
                        "holding its resource (default 60)")
    p.add_argument("--stage-timeout", type=float, default=None, metavar="S",
                   help="a stage still running after S seconds is killed and fails; on a "
                        "cluster, a task with no reply by then (and 5 minutes more) fails "
                        "too (default 21600: 6 hours)")
    _with_cache(p)


def _add_compare(sub: Subparsers) -> None:
    p = sub.add_parser("compare", help="compare the latency samples of two reports")
    p.add_argument("base", type=Path, help="baseline report.json")
    p.add_argument("head", type=Path, help="candidate report.json")
    p.add_argument("--threshold", type=float, default=10.0,
                   help="largest allowed slowdown, percent (default 10)")


def _add_plan(sub: Subparsers) -> None:
    p = sub.add_parser("plan", help="show the build graph and what would run")
    p.add_argument("recipe", type=Path)
    p.add_argument("--format", choices=("text", "json", "dot", "mermaid"), default="text")
    _with_targets(p)
    _with_cache(p)


def _add_worker(sub: Subparsers) -> None:
    p = sub.add_parser("worker", help="join a Dask scheduler as a build worker, or as a "
                       "target's device (docs/distributed.md)")
    p.add_argument("scheduler", help="the scheduler's address, tls://HOST:PORT")
    p.add_argument("--target", default=None, metavar="PROFILE",
                   help="serve this target profile's device (its runs_on resource tag)")
    p.add_argument("--name", default=None, help="the worker's name in the cluster")
    p.add_argument("--nthreads", type=int, default=1,
                   help="tasks at once, for a build worker (a device worker runs one)")
    _with_tls(p)


def _add_validate(sub: Subparsers) -> None:
    p = sub.add_parser("validate", help="check a recipe and its target profiles")
    p.add_argument("recipe", type=Path)


def _add_schema(sub: Subparsers) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of recipes (or target profiles)")
    p.add_argument("--kind", choices=("recipe", "target"), default="recipe")


def _add_listings(sub: Subparsers) -> None:
    sub.add_parser("targets", help="list the target profiles")
    sub.add_parser("passes", help="list the passes")


def _add_cache(sub: Subparsers) -> None:
    p = sub.add_parser("cache", help="inspect or clean the artifact cache; make the key "
                       "that signs shared-cache uploads")
    p.add_argument("action", choices=("ls", "verify", "gc", "keygen"),
                   help="verify: every digest, and the signature and writer of each entry "
                        "that came from a shared store; keygen: create the signing key "
                        "(or show the existing one's public key)")
    _with_trust(p)
    p.add_argument("--older-than-days", type=float, default=30.0,
                   help="gc: remove entries created longer ago than this")
    _with_cache(p)


class RedactingFormatter(logging.Formatter):
    """Every log line with URL passwords masked (core/redact.py), whoever logged it."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def ci_mode(flag: bool | None) -> bool:
    """`--ci`/`--no-ci` when given, else whether $CI says so (GitHub and GitLab set `true`)."""
    if flag is not None:
        return flag
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def cmd_run(args: argparse.Namespace) -> int:
    from edgebuild import api
    from edgebuild.execute.policy import FailurePolicy
    from edgebuild.run.summary import executed_count, stage_summary

    cluster = cluster_spec(args)
    ci = ci_mode(args.ci)
    if ci:
        # Stage workers inherit this: tqdm bars (NNCF's accuracy search, converters) would
        # fill the uploaded stage logs with carriage-return redraws.
        os.environ["TQDM_DISABLE"] = "1"
    if args.stage_timeout is not None and not args.stage_timeout > 0:
        raise EdgebuildError(f"--stage-timeout {args.stage_timeout:g}: a number of seconds > 0")
    loaded = api.load(args.recipe)
    options = api.RunOptions(
        out=args.out, cache_dir=args.cache_dir, jobs=args.jobs,
        policy=FailurePolicy.KEEP_GOING if args.keep_going else FailurePolicy.FAIL_FAST,
        progress=None if args.quiet else ProgressPrinter(), baseline=args.baseline,
        cluster=cluster,
        shared_cache=args.shared_cache or os.environ.get("EDGEBUILD_SHARED_CACHE") or None,
        shared_cache_trust=args.shared_cache_trust or [],
        shared_cache_key=args.shared_cache_key,
        resource_timeout_s=args.resource_timeout, targets=args.target,
        **({} if args.stage_timeout is None else {"stage_timeout_s": args.stage_timeout}))
    report = api.run(loaded, options)
    out = args.out or Path("build") / report.recipe
    built = report.counts.get("built", 0)
    cached = report.counts.get("cached", 0)
    print(f"\n{stage_summary(report, loaded)} ({report.seconds:.2f} s)")
    for target in report.targets:
        for gate in target.gates:
            mark = "PASS" if gate.status.value == "passed" else gate.status.value.upper()
            print(f"  {mark:<12} {gate.name}: {gate.message}")
        if not target.gates:
            print(f"  {'NO GATES':<12} {target.name}: nothing is gated")
        if target.search is not None:
            print_candidates(target.name, target.search)
    from edgebuild.report.render import could_not_time

    untimed = could_not_time(report)  # one line: the machine's state, not a verdict
    if untimed:
        print(f"\n{untimed}; run again on a quieter machine")
    contained = {sid for t in report.targets if t.search is not None and t.search.chosen
                 for row in t.search.candidates for sid in row.stages}
    for stage in report.stages:
        if stage.outcome == "failed" and stage.id not in contained:
            hint = f"\n  hint: {stage.hint}" if stage.hint else ""
            print(f"\nstage '{stage.id}' failed: {stage.message}{hint}\n  log: {stage.log}",
                  file=sys.stderr)
    if any(s.outcome == "failed" and s.id not in contained for s in report.stages):
        done = built + cached
        print(f"\nto resume: fix the cause and run the same command again; the {done} "
              f"stage(s) that finished are cached and will not run again.", file=sys.stderr)
    if ci:
        # Absolute and one per line, for `grep '^edgebuild: summary.md: '` in a CI step.
        print()
        for name in REPORT_FILES:
            print(f"edgebuild: {name}: {(out / name).resolve()}")
    else:
        print(f"\nreports: {out}/report.json, {out}/summary.md, {out}/junit.xml, "
              f"{out}/report.html")
    recorder = getattr(args, "recorder", None)
    if recorder is not None and executed_count(report) == 0:
        recorder.save(report.exit_code, report.seconds)
    return report.exit_code


REPORT_FILES = ("summary.md", "junit.xml", "report.html", "report.json")


def print_candidates(target: str, search: SearchReport) -> None:
    """The candidate table of a search, one line each (◆: on the Pareto front)."""
    print(f"  candidates of {target} (◆ on the Pareto front of p50 vs agreement):")
    width = max(len(row.name) for row in search.candidates)
    for row in search.candidates:
        p50 = f"p50 {row.p50_ms:7.3f} ms" if row.p50_ms is not None else f"p50 {'—':>7}   "
        agree = (f"agreement {row.top1_agreement:5.1f} %" if row.top1_agreement is not None
                 else f"agreement {'—':>5}  ")
        if row.ratio is not None and not row.chosen and row.ratio_ci95:
            note = f"x{row.ratio:.2f} [{row.ratio_ci95[0]:.2f}-{row.ratio_ci95[1]:.2f}] " \
                   "vs chosen, interleaved"
        else:
            note = row.reason or row.summary
        mark = "◆" if row.pareto else " "
        print(f"    {row.state:<12} {mark} {row.name:<{width}}  {p50}  {agree}  {note}")


def cmd_plan(args: argparse.Namespace) -> int:
    from edgebuild import api
    from edgebuild.plan.render import render

    built, status = api.plan(args.recipe, args.cache_dir, args.target)
    print(render(built, status, args.format))
    return ExitCode.OK


def cluster_spec(args: argparse.Namespace) -> ClusterSpec | None:
    """--cluster (or $EDGEBUILD_CLUSTER) with its TLS files, checked before anything runs:
    a plain tcp:// to another machine is a usage error unless --insecure."""
    text = args.cluster or os.environ.get("EDGEBUILD_CLUSTER") or None
    tls_given = args.tls_ca or args.tls_cert or args.tls_key or args.insecure
    if text is None:
        if tls_given:
            raise EdgebuildError("--tls-*/--insecure apply to --cluster, which is not given")
        return None
    from edgebuild.execute.cluster import ClusterSpec
    from edgebuild.execute.security import TlsFiles

    return ClusterSpec.parse(text, TlsFiles.from_args(args.tls_ca, args.tls_cert,
                                                      args.tls_key), args.insecure)


def cmd_worker(args: argparse.Namespace) -> int:
    from edgebuild.execute.cluster import serve_worker
    from edgebuild.execute.security import TlsFiles, check_address
    from edgebuild.recipe.profiles import load_profiles, profile_dirs

    tls = TlsFiles.from_args(args.tls_ca, args.tls_cert, args.tls_key)
    check_address(args.scheduler, tls, args.insecure)  # before the profile's tools
    profile = None
    if args.target is not None:
        profiles = load_profiles(profile_dirs(Path.cwd() / "recipe.yaml"))
        if args.target not in profiles:
            raise EdgebuildError(f"no target profile named '{args.target}'",
                                 did_you_mean(args.target, profiles) or "see `edgebuild targets`")
        profile = profiles[args.target].profile
    serve_worker(args.scheduler, profile, args.name, args.nthreads, tls, args.insecure)
    return ExitCode.OK


def cmd_validate(args: argparse.Namespace) -> int:
    from edgebuild import api
    from edgebuild.plan.planner import build_plan

    loaded = api.load(args.recipe)
    built = build_plan(loaded)
    candidates = sum(len(c) for c in loaded.searches.values())
    searched = f", {candidates} search candidate(s)" if candidates else ""
    print(f"{args.recipe}: valid ({len(loaded.recipe.targets)} target(s){searched}, "
          f"{len(built.graph)} stages)")
    return ExitCode.OK


def cmd_schema(args: argparse.Namespace) -> int:
    from edgebuild.recipe.schema import json_schema

    print(json.dumps(json_schema(args.kind), indent=2))
    return ExitCode.OK


def cmd_targets(args: argparse.Namespace) -> int:
    from edgebuild.recipe.profiles import load_profiles, profile_dirs
    from edgebuild.registry import backend_class

    profiles = load_profiles(profile_dirs(Path.cwd() / "recipe.yaml"))
    for name, loaded in sorted(profiles.items()):
        p = loaded.profile
        status = "" if backend_class(p.backend).implemented else "  [backend not available yet]"
        print(f"{name:<18} {p.backend:<12} {p.device.name}{status}")
    return ExitCode.OK


def cmd_passes(args: argparse.Namespace) -> int:
    from edgebuild.registry import load_op, pass_names

    for name in pass_names():
        op = load_op(name)
        extra = f"  [needs edgebuild[{op.extra}]]" if op.extra else ""
        print(f"{name:<18} {op.summary}{extra}")
    return ExitCode.OK


def cmd_compare(args: argparse.Namespace) -> int:
    import numpy as np

    from edgebuild.gates.regression import decide
    from edgebuild.report.baseline import latency_samples, load_report
    from edgebuild.report.opcompare import across_reports, text_lines

    base, head = load_report(args.base), load_report(args.head)
    base_samples, head_samples = latency_samples(base), latency_samples(head)
    common = sorted(set(base_samples) & set(head_samples))
    per_op = across_reports(base, head)  # each target both profiled: time by op type
    if not common and not per_op:
        raise EdgebuildError("the two reports share no target with latency samples",
                             f"targets: {sorted(base_samples)} vs {sorted(head_samples)}")
    print("note: the reports were measured in separate runs, so drift of the machine "
          "between them is not controlled;\n      in CI prefer `edgebuild run --baseline "
          "REPORT`, which measures both interleaved.")
    worst = ExitCode.OK
    for target in common:
        verdict = decide(np.asarray(base_samples[target]), np.asarray(head_samples[target]),
                         args.threshold / 100)
        print(f"  {verdict.decision.upper():<11} {target}: {verdict.sentence()}")
        if verdict.regressed:
            worst = ExitCode.GATE_FAILED
    for name, report in (("base", base), ("head", head)):
        loads = {g.target + g.gate.removeprefix("latency"):
                 g.details.get("conditions", {}).get("load_average")
                 for g in report.gates if g.is_latency}
        print(f"  {name} load average at measurement: {loads}")
    print("\n".join(text_lines(per_op)), end="\n" if per_op else "")
    return worst


COMMANDS = {"run": cmd_run, "compare": cmd_compare, "plan": cmd_plan, "worker": cmd_worker,
            "validate": cmd_validate, "schema": cmd_schema, "targets": cmd_targets,
            "passes": cmd_passes, "cache": cmd_cache, **fleet.COMMANDS,
            **profiling.COMMANDS, **boards.COMMANDS}


class _DaskOneLine(_OneLine):
    """Dask's records on the terminal as one line (execute/logs.py): a worker death logs
    tracebacks (the scheduler's failed scatter to a killed worker), which are not ours to
    show. The root handler sees every logger's records; only Dask's are collapsed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith("distributed") or super().filter(record)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with _replayable(args, argv) as recorder:
            if isinstance(recorder, int):
                return recorder  # replayed: nothing it read changed (run/replay.py)
            args.recorder = recorder
            handler = logging.StreamHandler()  # after the recorder: its stderr is teed
            handler.addFilter(_DaskOneLine())
            handler.setFormatter(RedactingFormatter("warning: %(message)s"))
            logging.basicConfig(level=logging.WARNING, handlers=[handler])
            return int(COMMANDS[args.command](args))
    except EdgebuildError as exc:
        print(printable(redact(f"error: {exc}"), newlines=True), file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted; finished stages are cached", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `edgebuild plan ... | head`: the reader left. Say nothing more, and keep
        # Python from failing again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.BROKEN_PIPE)
    except RecursionError as exc:
        return _internal_error(exc, "a structure nested too deeply")
    except Exception as exc:  # the one place an unexpected error becomes an exit code
        return _internal_error(exc, "")


@contextlib.contextmanager
def _replayable(args: argparse.Namespace, argv: list[str] | None
                ) -> Iterator[Recorder | int | None]:
    """For `edgebuild run` as the process's whole job (the console script, argv None): the
    exit code of a replayed fully cached run, else a recorder watching this one; None for
    every other command and for `main(argv)` called inside another program."""
    if argv is not None or args.command != "run" or args.no_replay:
        yield None
        return
    from edgebuild.run import replay

    if replay.asked_not_to():
        yield None
        return
    from edgebuild.cache.store import default_cache_dir

    root = args.cache_dir or default_cache_dir()
    code = replay.replay(root)
    if code is not None:
        yield code
        return
    with replay.recording(root) as recorder:
        yield recorder


def _internal_error(exc: BaseException, what: str) -> int:
    """One line and the log path; the traceback goes to the log, never to the terminal.

    Exit 4, never 1: CI reads 1 as "a gate failed", and a crash is not a verdict.
    """
    import tempfile
    import traceback

    try:
        handle, name = tempfile.mkstemp(prefix="edgebuild-internal-error-", suffix=".log")
        with os.fdopen(handle, "w") as log:
            log.write(redact(f"edgebuild {__version__}, argv {sys.argv}\n"))
            log.write(redact("".join(traceback.format_exception(exc))))
        where = f"the traceback is in {name}"
    except OSError:
        where = "the traceback could not be written anywhere"
    cause = redact(what or f"{type(exc).__name__}: {exc}")
    print(f"internal error: {cause.splitlines()[0] if cause else type(exc).__name__}\n"
          f"  {where}; please report it with the recipe that caused it", file=sys.stderr)
    return int(ExitCode.INTERNAL)


if __name__ == "__main__":
    sys.exit(main())
