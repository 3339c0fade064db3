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
    subprocess.run(argv, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/quickstart.yaml")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    import os

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EDGEBUILD_CACHE_DIR": f"{tmp}/cache"}
        out = f"{tmp}/out"
        edgebuild = [sys.executable, "-m", "edgebuild"]
        print(f"warming the cache: edgebuild run {args.recipe}", file=sys.stderr)
        cold = timed([*edgebuild, "run", "-q", args.recipe, "--out", out], env)
        commands = {
            "python -c pass (start-up)": [sys.executable, "-c", "pass"],
            "edgebuild --help": [*edgebuild, "--help"],
            "edgebuild plan": [*edgebuild, "plan", args.recipe],
            "edgebuild run (fully cached)": [*edgebuild, "run", "-q", args.recipe, "--out", out],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, argv in commands.items():
                samples[name].append(timed(argv, env))
    base = statistics.median(samples["python -c pass (start-up)"])
    print(f"\n`{args.recipe}`, {args.repeat} runs each, interleaved; cold run {cold:.1f} s\n")
    print("| command | median s | p90 s | minus start-up s |")
    print("|---|---|---|---|")
    for name, values in samples.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[int(0.9 * (len(values) - 1))]
        print(f"| {name} | {median:.3f} | {p90:.3f} | {median - base:.3f} |")


if __name__ == "__main__":
    main()
