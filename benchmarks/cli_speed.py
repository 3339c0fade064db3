"""How fast is edgebuild itself? `plan` and a fully cached `run` of a recipe.

    python benchmarks/cli_speed.py [--recipe recipes/quickstart.yaml] [--repeat 15]

Warms the cache with one real run, then times each command `--repeat` times,
interleaved, next to a bare `python -c pass` (interpreter start-up) measured in
the same loop, and prints medians, p90s and the overhead over start-up.
Wall-clock numbers on a shared machine move; compare the medians and ratios
from one invocation, not numbers across invocations.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, check=False, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    # 1 is a gate verdict (a latency budget on a busy machine, say), not a broken command.
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/quickstart.yaml")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--baseline-tree", type=Path, default=None, metavar="DIR",
                        help="another edgebuild source tree (e.g. a git worktree of an older "
                             "commit): time its commands too, interleaved, and print ratios")
    args = parser.parse_args()
    import os

    trees = {"this": REPO, **({"baseline": args.baseline_tree.resolve()}
                              if args.baseline_tree else {})}
    with tempfile.TemporaryDirectory() as tmp:
        edgebuild = [sys.executable, "-m", "edgebuild"]
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass (start-up)": ([sys.executable, "-c", "pass"], dict(os.environ))}
        colds = {}
        for tree, root in trees.items():
            # Each tree gets its own cache: their keys differ (edgebuild's code is in them).
            env = {**os.environ, "EDGEBUILD_CACHE_DIR": f"{tmp}/cache-{tree}",
                   "PYTHONPATH": str(root)}
            out = f"{tmp}/out-{tree}"
            recipe = str(root / args.recipe)
            print(f"warming the cache ({tree}): edgebuild run {args.recipe}", file=sys.stderr)
            colds[tree] = timed([*edgebuild, "run", "-q", recipe, "--out", out], env)
            commands.update({
                f"edgebuild --help [{tree}]": ([*edgebuild, "--help"], env),
                f"edgebuild plan [{tree}]": ([*edgebuild, "plan", recipe], env),
                f"edgebuild run (fully cached) [{tree}]":
                    ([*edgebuild, "run", "-q", recipe, "--out", out], env),
            })
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, (argv, env) in commands.items():
                samples[name].append(timed(argv, env))
    base = statistics.median(samples["python -c pass (start-up)"])
    cold = ", ".join(f"{tree} {seconds:.1f} s" for tree, seconds in colds.items())
    print(f"\n`{args.recipe}`, {args.repeat} runs each, interleaved; cold run {cold}\n")
    print("| command | median s | p90 s | minus start-up s |")
    print("|---|---|---|---|")
    medians = {}
    for name, values in samples.items():
        values.sort()
        median = medians[name] = statistics.median(values)
        p90 = values[int(0.9 * (len(values) - 1))]
        print(f"| {name} | {median:.3f} | {p90:.3f} | {median - base:.3f} |")
    if args.baseline_tree:
        print("\n| command | this / baseline (medians) |\n|---|---|")
        for name in ("edgebuild --help", "edgebuild plan", "edgebuild run (fully cached)"):
            ratio = medians[f"{name} [this]"] / medians[f"{name} [baseline]"]
            print(f"| {name} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
