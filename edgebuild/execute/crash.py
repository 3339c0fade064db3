"""Where a worker process crashed, read from its log.

A converter's native code that crashes (SIGSEGV in TFLite's MLIR quantizer, an abort in
QNN's or OpenVINO's) takes the Python process with it: no exception, no result file.
The worker enables `faulthandler`, which prints the Python stack the crash happened
under into the stage's log; this names its innermost frame, the edgebuild frame that
called into the tool, and the last line the tool itself logged before the crash (often
the node or op it was converting).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edgebuild.errors import plain

_FATAL = "Fatal Python error:"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
TAIL_BYTES = 256 * 1024  # a converter's log can be long: only its end matters here
SHOWN = 200


@dataclass(frozen=True)
class CrashSite:
    where: str = ""  # "in convert (lite.py:1234), called from edgebuild/passes/…:56"
    last: str = ""  # the log's last line before the crash report


def crash_site(log: Path) -> CrashSite:
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return CrashSite()
    lines = [plain(line).rstrip() for line in text.splitlines()]
    fatal = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith(_FATAL)),
                 None)
    if fatal is None:
        return CrashSite(last=_last(lines, len(lines)))
    frames = [m for m in (_FRAME.match(line) for line in lines[fatal:]) if m]
    if not frames:
        return CrashSite(last=_last(lines, fatal))
    inner = frames[0]
    where = f"in {inner['func']} ({Path(inner['file']).name}:{inner['line']})"
    ours = next((m for m in frames if "/edgebuild/" in m["file"] and m is not inner), None)
    if ours is not None:
        short = ours["file"][ours["file"].rfind("/edgebuild/") + 1:]
        where += f", called from {short}:{ours['line']} ({ours['func']})"
    return CrashSite(where=where, last=_last(lines, fatal))


def _last(lines: list[str], end: int) -> str:
    for line in reversed(lines[:end]):
        if line.strip():
            return line.strip()[:SHOWN]
    return ""
