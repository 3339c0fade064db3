"""Stage keys: a full sha256 over everything that can change a stage's output.

    key = sha256(canonical JSON of
                 op name, op version, params,
                 input artifact digests (content, not keys: equal outputs -> early cut-off),
                 dataset digests, model-source digest (if the stage reads it),
                 custom-op digest: declarations and every file they name (if declared),
                 the recipe's input/output declarations,
                 target-profile digest and backend version (target-specific stages),
                 versions of every tool involved, Python, the platform, and
                 edgebuild itself: its version, or in a source checkout its code's digest,
                 and for a stage whose result depends on the CPU it runs on — a latency,
                 an inference whose INT8 kernels differ per ISA, a search that measures
                 them — the host CPU: its model and its ISA extensions)

Anything left out of this list would let a stale result be reused, so an op
declares its tools and bumps its version whenever its output changes.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from functools import cache
from importlib.metadata import PackageNotFoundError
from pathlib import Path
from typing import Any

from edgebuild import __version__
from edgebuild.core.digest import digest_file, digest_json


@cache
def tool_version(distribution: str) -> str:
    """Installed version of a distribution, read from metadata (never imported).

    The `Version:` header is read from the metadata's header lines: `Distribution.version`
    parses the whole file (a long description included) with the email parser, ≈ 1 ms
    per tool, and every key names a dozen tools. Anything but a plain header line (a
    folded value) is left to that parser."""
    try:
        found = importlib.metadata.distribution(distribution)
    except PackageNotFoundError:
        return "not-installed"
    text = found.read_text("METADATA") or found.read_text("PKG-INFO") or ""
    lines = text.splitlines()
    for at, line in enumerate(lines):
        if not line:  # the end of the headers
            break
        if line[:8].lower() == "version:":
            folded = at + 1 < len(lines) and lines[at + 1][:1] in (" ", "\t")
            if not folded:
                return line[8:].lstrip(" \t")
            break
    return found.version


@cache
def edgebuild_fingerprint() -> str:
    """edgebuild's version; in a source checkout, a digest of its code as well.

    A released version's stages are pure functions of their declared inputs and
    its version. In development the code changes without the version, and an op
    whose author forgot to bump its `version` would reuse stale results, so there
    every Python file of the package enters every key (~90 files, a few ms).
    """
    package = Path(__file__).resolve().parents[1]
    if not (package.parent / "pyproject.toml").is_file():
        return __version__
    files = sorted(package.rglob("*.py"))
    return f"{__version__}+source." + digest_json(
        [[f.relative_to(package).as_posix(), digest_file(f)] for f in files])


def environment() -> dict[str, str]:
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "machine": platform.machine(),
        "edgebuild": edgebuild_fingerprint(),
        "edgebuild-key-schema": "2",
    }


# The extensions that change a runtime's kernels, hence a latency or an INT8 result: u8s8
# saturates without VNNI, OpenVINO runs bf16 by default where the CPU has it, AMX tiles.
ISA_FLAGS = frozenset({
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16",
    "asimd", "asimddp", "sve", "i8mm", "bf16"})


@cache
def host_cpu() -> str:
    """This machine's CPU as a stage key sees it: its model name and ISA extensions.

    The same machine name can hold another CPU tomorrow (a cloud VM is rescheduled): a
    latency measured on an AVX2 EPYC must not be served on a Xeon with AMX.
    """
    # platform.processor() runs `uname -p` on Linux: asked only when /proc/cpuinfo has
    # no model line (it is the name a line found there replaces).
    model, flags = "", set()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or platform.machine()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in ("model name", "Model", "CPU part") and value.strip():
            model = value.strip()
        elif name in ("flags", "Features"):
            flags |= set(value.split()) & ISA_FLAGS
            break  # every core lists the same
    model = model or platform.processor() or platform.machine()
    return f"{model} [{' '.join(sorted(flags))}]"


def stage_key(*, op: str, op_version: int, params: dict[str, Any], inputs: dict[str, str],
              datasets: dict[str, str], source: str | None, io: Any,
              custom_ops: str | None,
              target: str | None, backend: dict[str, Any] | None,
              tools: tuple[str, ...], callables: dict[str, str] | None = None,
              host_bound: bool = False) -> str:
    host = {"host_cpu": host_cpu()} if host_bound else {}
    return digest_json({
        **host,
        "op": op, "op_version": op_version, "params": params, "inputs": inputs,
        "datasets": datasets, "source": source, "custom_ops": custom_ops, "io": io,
        "callables": callables or {},
        "target": target, "backend": backend,
        "tools": {t: tool_version(t) for t in sorted(set(tools))},
        "environment": environment(),
    })
