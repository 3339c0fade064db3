"""Where stages run, and what it costs: a cold build with `--jobs 1`, `--jobs 2` and
`--cluster local:2`, then a fully cached run on this machine and with `--cluster`.

    python benchmarks/executors.py [--recipe recipes/fashion-mnist.yaml] \
        [--target 'host-cpu*'] [--repeat 1] [--cached-repeat 7]

Each cold build gets an empty cache; the three executors take turns in each
round, so machine noise falls on all of them alike. The fully cached runs
(interleaved too) show the Dask path's overhead when nothing needs building:
no cluster is started then. Wall-clock figures move on a shared machine; read
the ratios to `--jobs 1` measured in the same invocation, and write the CPU
(`lscpu`) next to them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXECUTORS = {"--jobs 1": ["--jobs", "1"], "--jobs 2": ["--jobs", "2"],
             "--cluster local:2": ["--cluster", "local:2"]}


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, check=False, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):  # 1: a gate verdict, not a broken command
        sys.exit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/fashion-mnist.yaml")
    parser.add_argument("--target", action="append", default=None)
    parser.add_argument("--repeat", type=int, default=1, help="cold builds per executor")
    parser.add_argument("--cached-repeat", type=int, default=7)
    args = parser.parse_args()
    targets = [x for t in (args.target or []) for x in ("--target", t)]
    base = [sys.executable, "-m", "edgebuild", "run", "-q", args.recipe, *targets]
    cold: dict[str, list[float]] = {name: [] for name in EXECUTORS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat):
            for name, flags in EXECUTORS.items():
                cache = f"{tmp}/cache-{round_}-{name.replace(' ', '_')}"
                env = {**os.environ, "EDGEBUILD_CACHE_DIR": cache}
                cold[name].append(timed([*base, *flags, "--out", f"{tmp}/out"], env))
                print(f"cold {name}: {cold[name][-1]:.1f} s", file=sys.stderr)
        warm = f"{tmp}/cache-0-{'--jobs_1'}"
        env = {**os.environ, "EDGEBUILD_CACHE_DIR": warm}
        cached: dict[str, list[float]] = {"cached, this machine": [],
                                          "cached, --cluster local:2": []}
        for _ in range(args.cached_repeat):
            cached["cached, this machine"].append(timed([*base, "--out", f"{tmp}/o1"], env))
            cached["cached, --cluster local:2"].append(
                timed([*base, "--cluster", "local:2", "--out", f"{tmp}/o2"], env))
    one = statistics.median(cold["--jobs 1"])
    print(f"\n{args.recipe} {' '.join(targets)} — cold build, {args.repeat} round(s)\n")
    print("| executor | median s | ratio to --jobs 1 |\n|---|---|---|")
    for name, values in cold.items():
        print(f"| `{name}` | {statistics.median(values):.1f} | "
              f"{statistics.median(values) / one:.2f} |")
    print(f"\nfully cached run, {args.cached_repeat} interleaved runs\n")
    print("| run | median s | p90 s |\n|---|---|---|")
    for name, values in cached.items():
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        print(f"| {name} | {statistics.median(values):.2f} | {p90:.2f} |")


if __name__ == "__main__":
    main()
