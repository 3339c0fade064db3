"""`edgebuild profile RECIPE --target T`: re-profile one target without a full run.

    recipe ─ target T, its gates set aside ─ build_plan(profiling) ─▶ chain ─ compile ─
        measure-latency (profile on: gates/profiling.py) ─ run_recipe ─▶ OUT/profile.json,
        the reports, and the top operators and time by op type on the terminal

The run machinery is the run's (run/driver.py): the chain and the compile are the stages
`edgebuild run` has (same keys, so cached builds are reused); the measure-latency is the
run's too when the target sets `measure.profile`, else one of its own (params
`profile: true`). Only argparse at import time: the CLI imports this module.

Exit codes (docs/cli.md): 0 a profile was taken and written; 2 usage or recipe error
(an unknown target, a search target); 3 a stage failed, or no profile could be taken
(the backend has no per-operator profiler here, the device is not reachable): the
reason is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.errors import EdgebuildError, ExitCode

if TYPE_CHECKING:
    from edgebuild.execute.result import Progress
    from edgebuild.recipe.loader import LoadedRecipe
    from edgebuild.report.model import Report, TargetReport

PROFILE_FILE = "profile.json"
TOP = 10


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profile", help="re-profile one target: its build and a per-operator "
                       "profile, without the rest of the run (docs/profiles.md)")
    p.add_argument("recipe", type=Path)
    p.add_argument("--target", required=True, metavar="NAME", help="the target to profile")
    p.add_argument("--out", type=Path, default=None,
                   help="where profile.json and the reports go (default: "
                        "build/<recipe name>/profile-<target>)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="artifact cache (default: $EDGEBUILD_CACHE_DIR or ~/.cache/edgebuild)")


def for_profiling(loaded: LoadedRecipe, target: str) -> LoadedRecipe:
    """The recipe with `target`'s gates set aside: the profile is what is asked for,
    and no gate's stage (accuracy, throughput, a speed-up's other build) is planned."""
    from edgebuild.recipe.models import Gates

    entry = loaded.recipe.targets[target].model_copy(update={"gates": Gates()})
    recipe = loaded.recipe.model_copy(
        update={"targets": {**loaded.recipe.targets, target: entry}})
    return dataclasses.replace(loaded, recipe=recipe)


def profile_target(loaded: LoadedRecipe, target: str, out: Path, cache_dir: Path | None,
                   progress: Progress | None = None) -> Report:
    """Plan and run `target`'s chain, compile and profiling measure-latency; write the
    reports and OUT/profile.json (the OpProfile, when one was taken)."""
    from edgebuild import api

    report = api.run(for_profiling(loaded, target), api.RunOptions(
        out=out, cache_dir=cache_dir, targets=[target], profiling=True, progress=progress))
    found = next(t for t in report.targets if t.name == target)
    if found.op_profile is not None:
        (out / PROFILE_FILE).write_text(found.op_profile.model_dump_json(indent=1))
    return report


def cmd_profile(args: argparse.Namespace) -> int:
    from edgebuild import api
    from edgebuild.cli import ProgressPrinter
    from edgebuild.plan.planner import build_plan, select_targets

    loaded = api.load(args.recipe)
    if args.target not in loaded.recipe.targets:
        select_targets(loaded, [args.target])  # the error names the close matches
        raise EdgebuildError(f"--target {args.target}: name one target (not a pattern)",
                             f"targets: {', '.join(loaded.recipe.targets)}")
    target = args.target
    prepared = for_profiling(loaded, target)
    progress = None
    if not args.quiet:
        progress = ProgressPrinter(len(build_plan(prepared, only=[target],
                                                  profiling=True).graph))
    out = args.out or Path("build") / loaded.recipe.name / f"profile-{target}"
    report = profile_target(loaded, target, out, args.cache_dir, progress)
    for stage in report.stages:
        if stage.outcome == "failed":
            print(f"\nstage '{stage.id}' failed: {stage.message}\n  log: {stage.log}",
                  file=sys.stderr)
    found = next(t for t in report.targets if t.name == target)
    print("\n".join(summary_lines(found)))
    if report.exit_code == ExitCode.STAGE_FAILED:
        return ExitCode.STAGE_FAILED
    if found.op_profile is None or found.op_profile.unmeasurable:
        return ExitCode.STAGE_FAILED
    print(f"\nprofile: {out / PROFILE_FILE}\nreports: {out}/report.json, {out}/summary.md, "
          f"{out}/report.html")
    return ExitCode.OK


def _plain(text: str) -> str:
    """A name from the model file, for the terminal: no control character."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def summary_lines(target: TargetReport) -> list[str]:
    """The terminal's view: how it was measured, time by op type, the top operators."""
    from edgebuild.report.profile import TYPES, measured_line, memory_text

    profile = target.op_profile
    lines = [f"\n{target.name} ({target.backend}):"]
    if target.memory is not None:
        lines.append(f"  memory: {_plain(memory_text(target.memory))}")
    if profile is None:
        return [*lines, "  no profile: its measure-latency stage did not finish"]
    if profile.unmeasurable:
        return [*lines, f"  no profile: {_plain(profile.unmeasurable)}"]
    lines.append(f"  profile: {_plain(measured_line(profile))}")
    total = profile.ops_ms or 0.0
    lines.append("  time by op type (ms a run, share):")
    for kind, ms in list(profile.by_type().items())[:TYPES]:
        lines.append(f"    {_plain(kind):<24} {ms:9.3f}  {ms / total if total else 0:4.0%}")
    lines.append(f"  top {TOP} operators (ms a run, share, kernel / provider):")
    for row in profile.top(TOP):
        fused = " (fused group)" if row.fused else ""
        lines.append(f"    {_plain(row.node)[:48]:<48} {_plain(row.op_type):<16} "
                     f"{row.ms:9.3f}  {row.share:4.0%}  {_plain(row.exec or '—')}{fused}")
    return lines


COMMANDS = {"profile": cmd_profile}
