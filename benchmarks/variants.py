"""FP32 vs FP16 vs INT8 vs pruned, per recipe: latency, size and accuracy in one table.

    python benchmarks/variants.py [recipes/efficientnet-lite0-variants.yaml ...]

Runs each recipe with the real CLI (cached stages are reused; pass
`--fresh-cache` to measure everything again), then prints one Markdown table
per recipe from its report.json. All targets of a recipe are measured by the
same protocol on the same machine in one run, so compare rows within a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ["recipes/fashion-mnist.yaml", "recipes/efficientnet-lite0-variants.yaml"]


def table(report: dict) -> str:  # type: ignore[type-arg]
    lines = [f"### `{report['recipe']}`", "",
             "| target | accuracy | top-1 agreement with FP32 | p50 ms | p90 ms | size MB "
             "| gates |",
             "|---|---|---|---|---|---|---|"]
    for target in report["targets"]:
        gates = {g["gate"]: g for g in target["gates"]}
        accuracy = gates.get("accuracy", {}).get("measured", {})
        latency = gates.get("latency", {}).get("measured", {})
        top1 = f"{accuracy['top1']:.2f} %" if "top1" in accuracy else "—"
        agree = f"{accuracy['top1_agreement']:.1f} %" if "top1_agreement" in accuracy else "—"
        p50 = f"{latency['p50']:.3f}" if latency else "—"
        p90 = f"{latency['p90']:.3f}" if latency else "—"
        size = f"{target['size_bytes'] / 1e6:.2f}" if target.get("size_bytes") else "—"
        verdict = ", ".join(f"{g['gate']} {g['status']}" for g in target["gates"])
        lines.append(f"| {target['name']} | {top1} | {agree} | {p50} | {p90} | {size} | "
                     f"{verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="*", default=DEFAULT)
    parser.add_argument("--fresh-cache", action="store_true")
    args = parser.parse_args()
    env = dict(os.environ)
    scratch = tempfile.TemporaryDirectory()
    if args.fresh_cache:
        env["EDGEBUILD_CACHE_DIR"] = f"{scratch.name}/cache"
    for recipe in args.recipes:
        out = Path(scratch.name) / Path(recipe).stem
        command = [sys.executable, "-m", "edgebuild", "run", "-q", recipe, "--out", str(out),
                   "--keep-going"]
        print("$ edgebuild " + " ".join(command[3:]), file=sys.stderr)
        result = subprocess.run(command, cwd=REPO, env=env, check=False)
        if result.returncode not in (0, 1):  # 1 = a gate failed, which the table shows
            sys.exit(f"{recipe}: edgebuild exited {result.returncode}")
        print(table(json.loads((out / "report.json").read_text())) + "\n")


if __name__ == "__main__":
    main()
