"""Stage keys: a full sha256 over everything that can change a stage's output.

    key = sha256(canonical JSON of
                 op name, op version, params,
                 input artifact digests (content, not keys: equal outputs -> early cut-off),
                 dataset digests, model-source digest (if the stage reads it),
                 the recipe's input/output declarations,
                 target-profile digest (target-specific stages only),
                 versions of every tool involved, Python and the platform)

Anything left out of this list would let a stale result be reused, so an op
declares its tools and bumps its version whenever its output changes.
"""

from __future__ import annotations

import platform
import sys
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from edgebuild.cache.digest import digest_json


@cache
def tool_version(distribution: str) -> str:
    """Installed version of a distribution, read from metadata (never imported)."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not-installed"


def environment() -> dict[str, str]:
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "machine": platform.machine(),
        "edgebuild-key-schema": "1",
    }


def stage_key(*, op: str, op_version: int, params: dict[str, Any], inputs: dict[str, str],
              datasets: dict[str, str], source: str | None, io: Any,
              target: str | None, tools: tuple[str, ...]) -> str:
    return digest_json({
        "op": op, "op_version": op_version, "params": params, "inputs": inputs,
        "datasets": datasets, "source": source, "io": io, "target": target,
        "tools": {t: tool_version(t) for t in sorted(set(tools))},
        "environment": environment(),
    })
