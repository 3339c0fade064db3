"""`edgebuild profile RECIPE --target T [--target U]`: re-profile targets without a full run.

    recipe ─ target T, its gates set aside ─ build_plan(profiling) ─▶ chain ─ compile ─
        measure-latency (profile on: measuring/profiling.py) ─ run_recipe ─▶ OUT/profile-T.json,
        the reports, and the top operators and time by op type on the terminal

With two targets or more, those of one target profile and backend are also shown side
by side by op type (report/opcompare.py's pairs).

The run machinery is the run's (run/driver.py): the chain and the compile are the stages
`edgebuild run` has (same keys, so cached builds are reused); the measure-latency is the
run's too when the target sets `measure.profile`, else one of its own (params
`profile: true`). Only argparse at import time: the CLI imports this module.

Exit codes (docs/cli.md): 0 every target's profile was taken and written; 2 usage or
recipe error (an unknown target, a search target); 3 a stage failed, or a profile could
not be taken (the backend has no per-operator profiler here, the device is not
reachable): the reason is printed.
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

def profile_file(target: str) -> str:
    return f"profile-{target}.json"  # a recipe's target name: SAFE_NAME, a plain file name

TOP = 10


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profile", help="re-profile one target: its build and a per-operator "
                       "profile, without the rest of the run (docs/profiles.md)")
    p.add_argument("recipe", type=Path)
    p.add_argument("--target", required=True, action="append", metavar="NAME",
                   help="the target to profile (repeatable: two targets are also compared "
                        "by op type when they pair, docs/profiles.md)")
    p.add_argument("--out", type=Path, default=None,
                   help="where profile-<target>.json and the reports go (default: "
                        "build/<recipe name>/profile)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="artifact cache (default: $EDGEBUILD_CACHE_DIR or ~/.cache/edgebuild)")


def for_profiling(loaded: LoadedRecipe, targets: list[str]) -> LoadedRecipe:
    """The recipe with `targets`' gates set aside: the profile is what is asked for,
    and no gate's stage (accuracy, throughput, a speed-up's other build) is planned."""
    from edgebuild.recipe.models import Gates

    entries = dict(loaded.recipe.targets)
    for name in targets:
        entries[name] = entries[name].model_copy(update={"gates": Gates()})
    recipe = loaded.recipe.model_copy(update={"targets": entries})
    return dataclasses.replace(loaded, recipe=recipe)


def profile_targets(loaded: LoadedRecipe, targets: list[str], out: Path,
                    cache_dir: Path | None, progress: Progress | None = None) -> Report:
    """Plan and run each target's chain, compile and profiling measure-latency; write the
    reports and OUT/profile-<target>.json (the OpProfile, when one was taken)."""
    from edgebuild.cache.store import default_cache_dir
    from edgebuild.run.driver import RunOptions, run_recipe

    report = run_recipe(for_profiling(loaded, targets), RunOptions(
        out=out, cache_dir=cache_dir, targets=targets, profiling=True, progress=progress),
        cache_dir or default_cache_dir())
    for found in report.targets:
        if found.op_profile is not None:
            (out / profile_file(found.name)).write_text(
                found.op_profile.model_dump_json(indent=1))
    return report


def cmd_profile(args: argparse.Namespace) -> int:
    from edgebuild.plan.planner import select_targets
    from edgebuild.recipe.loader import load_recipe
    from edgebuild.report.opcompare import comparisons, text_lines
    from edgebuild.run.progress import ProgressPrinter

    loaded = load_recipe(args.recipe)
    for name in args.target:
        if name not in loaded.recipe.targets:
            select_targets(loaded, [name])  # the error names the close matches
            raise EdgebuildError(f"--target {name}: name a target (not a pattern)",
                                 f"targets: {', '.join(loaded.recipe.targets)}")
    targets = list(dict.fromkeys(args.target))
    progress = None if args.quiet else ProgressPrinter()  # the driver says the plan's size
    out = args.out or Path("build") / loaded.recipe.name / "profile"
    report = profile_targets(loaded, targets, out, args.cache_dir, progress)
    for stage in report.stages:
        if stage.outcome == "failed":
            print(f"\nstage '{stage.id}' failed: {stage.message}\n  log: {stage.log}",
                  file=sys.stderr)
    for found in report.targets:
        print("\n".join(summary_lines(found)))
    side_by_side = text_lines(comparisons(report))
    if side_by_side:
        print("\n" + "\n".join(side_by_side))
    written = [out / profile_file(t.name) for t in report.targets
               if t.op_profile is not None and not t.op_profile.unmeasurable]
    for path in written:
        print(f"\nprofile: {path}")
    print(f"reports: {out}/report.json, {out}/summary.md, {out}/report.html")
    if report.exit_code == ExitCode.STAGE_FAILED or len(written) < len(targets):
        return ExitCode.STAGE_FAILED
    return ExitCode.OK


def _plain(text: str) -> str:
    """A name from the model file, for the terminal: no control character."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def summary_lines(target: TargetReport) -> list[str]:
    """The terminal's view: how it was measured, time by op type, the top operators."""
    from edgebuild.report.profile import by_type_rows, measured_line, memory_text, ms_text

    profile = target.op_profile
    lines = [f"\n{target.name} ({target.backend}):"]
    if target.memory is not None:
        lines.append(f"  memory: {_plain(memory_text(target.memory))}")
    if profile is None:
        return [*lines, "  no profile: its measure-latency stage did not finish"]
    if profile.unmeasurable:
        return [*lines, f"  no profile: {_plain(profile.unmeasurable)}"]
    lines.append(f"  profile: {_plain(measured_line(profile))}")
    if profile.note:
        lines.append(f"  note: {_plain(profile.note)}")
    lines.append("  time by op type (ms a run, share):")
    for kind, ms, share in by_type_rows(profile):
        lines.append(f"    {_plain(kind):<24} {ms_text(ms):>9}  {share:4.0%}")
    lines.append(f"  top {TOP} operators (ms a run, share, kernel / provider):")
    for row in profile.top(TOP):
        fused = " (fused group)" if row.fused else ""
        lines.append(f"    {_plain(row.node)[:48]:<48} {_plain(row.op_type):<16} "
                     f"{ms_text(row.ms):>9}  {row.share:4.0%}  {_plain(row.exec or '—')}{fused}")
    return lines


COMMANDS = {"profile": cmd_profile}
