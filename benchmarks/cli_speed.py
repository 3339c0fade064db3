"""How fast is edgebuild itself? Import, `--help`, `plan` and a fully cached `run`.

    python benchmarks/cli_speed.py [--recipe recipes/quickstart.yaml] [--repeat 15]
        [--cache-dir DIR] [--baseline-tree DIR]

The fully cached run is timed twice: as a user gets it (the second and later runs
replayed, run/replay.py, when nothing they read changed) and with --no-replay (every
stage looked up again); the report says how many runs were replayed.

Warms the cache with one real run, then times each command `--repeat` times,
interleaved, next to a bare `python -c pass` (interpreter start-up) measured in
the same loop, and prints medians, p90s and the overhead over start-up, and how
many stages the last cached run still ran in a worker process (report.json:
a stage a worker ran records when it started) and how many were not cached.
Wall-clock numbers on a shared machine move; compare the medians and ratios
from one invocation, not numbers across invocations. The CPU column (user +
system seconds of the command and its children) moves much less with load: on a
busy machine it is the better measure of the work a command does.

`--cache-dir` reuses a warmed cache (the quickstart's cold run takes minutes);
trees whose stage keys agree share it. In a source checkout edgebuild's code is
in every key, so two checkouts never do; two copies of the `edgebuild` package
alone (no pyproject.toml beside them: keys hold only the version) do.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


REPLAYED = "its account is replayed above"  # run/replay.py's line on stderr


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, bool]:
    """Wall and CPU seconds (user + system, of the command and the processes it waited
    for) of one command, and whether it was a replayed run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # Not from a checkout: `python -m`/`-c` put the working directory first on sys.path,
    # ahead of PYTHONPATH, and would import that checkout's edgebuild for every tree.
    done = subprocess.run(argv, cwd=tempfile.gettempdir(), env=env, check=False,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # 1 is a gate verdict (a latency budget on a busy machine, say), not a broken command.
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, REPLAYED in done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/quickstart.yaml")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--baseline-tree", type=Path, default=None, metavar="DIR",
                        help="another edgebuild source tree (e.g. a git worktree of an older "
                             "commit): time its commands too, interleaved, and print ratios")
    parser.add_argument("--tree", type=Path, default=REPO, metavar="DIR",
                        help="the folder holding the `edgebuild` package to time (default: "
                             "this checkout)")
    parser.add_argument("--target", action="append", default=[], metavar="GLOB",
                        help="plan and run only these targets (repeatable), as the CLI's "
                             "--target")
    parser.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                        help="a cache to warm and reuse for every tree (default: a fresh "
                             "one per tree)")
    args = parser.parse_args()
    import os

    # Bytecode cached as a user's install has it (a CI image may switch it off).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    trees = {"this": args.tree.resolve(), **({"baseline": args.baseline_tree.resolve()}
                                            if args.baseline_tree else {})}
    with tempfile.TemporaryDirectory() as tmp:
        edgebuild = [sys.executable, "-m", "edgebuild"]
        only = [arg for glob in args.target for arg in ("--target", glob)]
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass (start-up)": ([sys.executable, "-c", "pass"], dict(os.environ))}
        colds = {}
        outs: dict[str, str] = {}
        for tree, root in trees.items():
            # Each tree gets its own cache: their keys differ (edgebuild's code is in them).
            cache = args.cache_dir.resolve() if args.cache_dir else f"{tmp}/cache-{tree}"
            env = {**os.environ, "EDGEBUILD_CACHE_DIR": str(cache), "PYTHONPATH": str(root)}
            out = outs[tree] = f"{tmp}/out-{tree}"
            # The tree's own copy of the recipe, if it has one (its schema may be older).
            own = root / args.recipe
            recipe = str((own if own.is_file() else REPO / args.recipe).resolve())
            print(f"warming the cache ({tree}): edgebuild run {args.recipe}", file=sys.stderr)
            colds[tree], _, _ = timed([*edgebuild, "run", "-q", recipe, "--out", out, *only], env)
            commands.update({
                f"import edgebuild.cli [{tree}]":
                    ([sys.executable, "-c", "import edgebuild.cli"], env),
                f"edgebuild --help [{tree}]": ([*edgebuild, "--help"], env),
                f"edgebuild plan [{tree}]": ([*edgebuild, "plan", recipe, *only], env),
                f"edgebuild run (fully cached) [{tree}]":
                    ([*edgebuild, "run", "-q", recipe, "--out", out, *only], env),
                # The same run looking every stage up again (run/replay.py not asked).
                # Its own --out: a run that is not replayed writes its reports again,
                # which is a change the other command's next run would see.
                f"edgebuild run (fully cached, --no-replay) [{tree}]":
                    ([*edgebuild, "run", "-q", recipe, "--out", f"{out}-no-replay", *only],
                     {**env, "EDGEBUILD_NO_REPLAY": "1"}),
            })
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu_samples: dict[str, list[float]] = {name: [] for name in commands}
        replays: dict[str, int] = {name: 0 for name in commands}
        for _ in range(args.repeat):
            for name, (argv, env) in commands.items():
                wall, cpu, replayed = timed(argv, env)
                samples[name].append(wall)
                cpu_samples[name].append(cpu)
                replays[name] += replayed
        workers = {tree: _stages(Path(out) / "report.json") for tree, out in outs.items()}
    base = statistics.median(samples["python -c pass (start-up)"])
    cold = ", ".join(f"{tree} {seconds:.1f} s" for tree, seconds in colds.items())
    print(f"\n`{args.recipe}` {' '.join(only)}, {args.repeat} runs each, interleaved; "
          f"cold run {cold}\n")
    print("| command | median s | p90 s | minus start-up s | median CPU s |")
    print("|---|---|---|---|---|")
    medians, cpus = {}, {}
    for name, values in samples.items():
        values.sort()
        median = medians[name] = statistics.median(values)
        p90 = values[int(0.9 * (len(values) - 1))]
        cpu = cpus[name] = statistics.median(cpu_samples[name])
        print(f"| {name} | {median:.3f} | {p90:.3f} | {median - base:.3f} | {cpu:.3f} |")
    for name, count in replays.items():
        if name.startswith("edgebuild run"):
            print(f"\n{name}: {count} of {args.repeat} runs replayed")
    for tree, (ran, uncached, total) in workers.items():
        print(f"\nlast cached run [{tree}]: {ran} of {total} stages ran in a worker process, "
              f"{uncached} not cached")
    if args.baseline_tree:
        print("\n| command | this / baseline, wall (medians) | this / baseline, CPU |\n"
              "|---|---|---|")
        for name in ("import edgebuild.cli", "edgebuild --help", "edgebuild plan",
                     "edgebuild run (fully cached)", "edgebuild run (fully cached, --no-replay)"):
            ratio = medians[f"{name} [this]"] / medians[f"{name} [baseline]"]
            cpu_ratio = cpus[f"{name} [this]"] / cpus[f"{name} [baseline]"]
            print(f"| {name} | {ratio:.2f} | {cpu_ratio:.2f} |")


def _stages(report: Path) -> tuple[int, int, int]:
    """(stages a worker ran, stages not cached, all stages) of a run's report.json."""
    import json

    stages = json.loads(report.read_text())["stages"]
    return (sum(1 for s in stages if s.get("started", 0) > 0),
            sum(1 for s in stages if not s["cached"]), len(stages))


if __name__ == "__main__":
    main()
