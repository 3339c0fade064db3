"""benchmark_model's per-operator tables (`--enable_op_profiling=true`) read as an OpProfile.

What the tool prints (tflite/tools/benchmark/profiling_listener.cc, the tables from
xla/tsl/util/stats_calculator.cc) after its timed runs:

    Operator-wise Profiling Info for Regular Benchmark Runs:
    ===== Run Order =====                 one row per node, in execution order
      [node type] [start] [first] [avg ms] [%] [cdf%] [mem KB] [times called] [Name]
    ===== Top by Computation Time =====   the same rows, the slowest ten
    ===== Summary by node type =====      [Node type] [count] [avg ms] [avg %] ...
    Timings (microseconds): count=N first=.. curr=.. min=.. max=.. avg=.. std=..

`avg ms` is the mean of one call of the node and `times called` the calls in one run
(a delegate's kernels can run several times a run), so a node's time a run is their
product, and `%` is that time's share of the run's summed node time; `Timings` is the
per-run sum of every node's time (µs). Builds since about 2023 drop `[start]`, and older
ones name nodes without the `:<index>` suffix: the columns are read from the header.

The text comes from a phone: it is parsed strictly (a table whose rows do not match its
header is an error, not a guess), its size and row count are capped, and nothing in it
is evaluated. The report escapes every name (they come from the model file).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from edgebuild.measure.record import OpProfile, OpRow

SOURCE = "TFLite benchmark_model --enable_op_profiling (on the device)"
SECTION = "Operator-wise Profiling Info for Regular Benchmark Runs"
MAX_BYTES = 16_000_000  # a log larger than this is refused, not read
MAX_ROWS = 50_000
MAX_NAME = 2_000  # characters of a node name kept
MAX_VALUE = 1e12  # a time, share or call count above this is not benchmark_model's
NOTE = ("benchmark_model's own per-node times on the device (its profiler's mean per call × "
        "calls per run); a delegate's partition is one row named by the tensors it writes, "
        "and the .tflite's node names are TensorFlow's (onnx2tf), not the ONNX nodes")

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RULE = re.compile(r"^=+\s*(?P<title>[^=]+?)\s*=+$")
_HEADER_COL = re.compile(r"\[([^\]\n]{1,40})\]")
_TIMINGS = re.compile(rf"Timings \(microseconds\): count=(?P<count>\d+)"
                      rf"(?: first=(?P<first>{_NUM}))? curr=(?P<curr>{_NUM})"
                      rf"(?:\(all same\))?(?: min={_NUM} max={_NUM} avg=(?P<avg>{_NUM}))?")
_PREFIX = re.compile(r"^(?:INFO: |I tflite\s*: )")


class ProfileLogError(ValueError):
    """benchmark_model's op profile is not in the form this parser knows."""


@dataclass(frozen=True)
class Table:
    """One of the tool's tables: its column names and its rows as (type, numbers, name)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, dict[str, float], str], ...]


def _lines(text: str) -> list[str]:
    if len(text) > MAX_BYTES:
        raise ProfileLogError(f"benchmark_model's log is {len(text)} characters, over the "
                              f"{MAX_BYTES} this parser reads")
    return [_PREFIX.sub("", line.rstrip("\r")) for line in text.splitlines()]


def _row_pattern(columns: tuple[str, ...], named: bool) -> re.Pattern[str]:
    numbers = len(columns) - (2 if named else 1)
    cells = r"\s+".join([rf"({_NUM})%?"] * numbers)
    tail = r"\s+(?P<name>\S.*?)" if named else ""
    return re.compile(rf"^\s*(?P<type>\S.*?)\s+{cells}{tail}\s*$")


def _table(lines: list[str], start: int, title: str) -> tuple[Table, int]:
    """The table whose `===== title =====` rule is lines[start]; and the line after it."""
    if start + 1 >= len(lines):
        raise ProfileLogError(f"the '{title}' table has no header line")
    header = lines[start + 1]
    columns = tuple(c.strip().lower() for c in _HEADER_COL.findall(header))
    if not columns or columns[0] != "node type":
        raise ProfileLogError(f"the '{title}' table's header is not benchmark_model's: "
                              f"{header.strip()[:200]!r}")
    named = columns[-1] == "name"
    pattern = _row_pattern(columns, named)
    numeric = columns[1:-1] if named else columns[1:]
    rows = []
    index = start + 2
    while index < len(lines) and lines[index].strip():
        line = lines[index]
        if _RULE.match(line.strip()):
            break
        if len(line) > MAX_NAME + 400:
            raise ProfileLogError(f"line {index + 1}: a table row of {len(line)} characters")
        match = pattern.match(line)
        if match is None:
            raise ProfileLogError(f"line {index + 1} of the '{title}' table does not have "
                                  f"its {len(columns)} columns: {line.strip()[:200]!r}")
        cells = match.groups()[1:1 + len(numeric)]  # group 1 is the node type
        values = {col: _number(cell, f"line {index + 1} of the '{title}' table, [{col}]")
                  for col, cell in zip(numeric, cells, strict=True)}
        name = match.group("name")[:MAX_NAME] if named else ""
        rows.append((match.group("type").strip(), values, name))
        if len(rows) > MAX_ROWS:
            raise ProfileLogError(f"the '{title}' table has over {MAX_ROWS} rows")
        index += 1
    return Table(title, columns, tuple(rows)), index


def _number(cell: str, where: str) -> float:
    """A cell as a finite number no larger than MAX_VALUE (`1e999` parses to inf, and an
    infinite time must not reach report.json); ProfileLogError naming the row."""
    value = float(cell)
    if not math.isfinite(value) or abs(value) > MAX_VALUE:
        raise ProfileLogError(f"{where}: {cell[:40]!r} is not a finite number up to "
                              f"{MAX_VALUE:g}")
    return value


@dataclass(frozen=True)
class RunProfile:
    """The regular runs' section: its tables by title and its `Timings` line."""

    tables: dict[str, Table]
    runs: int | None
    total_us: float | None  # the tool's per-run total of node time (Timings avg)


def regular_runs(text: str) -> RunProfile | None:
    """The "Operator-wise Profiling Info for Regular Benchmark Runs" section, or None when
    the log has none (profiling was off, or the run failed before it)."""
    lines = _lines(text)
    starts = [i for i, line in enumerate(lines) if SECTION in line]
    if not starts:
        return None
    index = starts[-1] + 1
    tables: dict[str, Table] = {}
    runs = total = None
    while index < len(lines):
        stripped = lines[index].strip()
        rule = _RULE.match(stripped)
        if rule:
            table, index = _table(lines, index, rule["title"])
            tables.setdefault(table.title, table)
            continue
        if m := _TIMINGS.search(stripped):
            runs = int(m["count"])
            total = _number(m["avg"] if m["avg"] is not None else m["curr"],
                            f"line {index + 1}, the Timings avg")
            break
        if stripped.startswith(("Profiling Info for", "Operator-wise")):
            break  # another section (a second listener's)
        index += 1
    if "Run Order" not in tables:
        raise ProfileLogError(f"the '{SECTION}' section has no Run Order table")
    return RunProfile(tables, runs, total)


def _exec(node_type: str, name: str) -> str:
    if node_type.startswith("TfLite") and "Delegate" in node_type:
        return f"{node_type} (a delegate partition)"
    if name.startswith("Delegate/"):
        return "XNNPACK"  # the XNNPACK delegate's own operators (builds since 2023)
    return "builtin kernel"


def op_profile(text: str) -> OpProfile | None:
    """benchmark_model's log as an OpProfile (None: the log has no op profile).

    A row's `ms` is its time a run (avg ms × times called); `runtime_ms` is the tool's
    per-run total from the `Timings` line when it printed one, else the sum the `%`
    column implies (each row's time / its share)."""
    found = regular_runs(text)
    if found is None:
        return None
    order = found.tables["Run Order"]
    if "avg ms" not in order.columns:
        raise ProfileLogError("the Run Order table has no [avg ms] column")
    raw: list[tuple[str, str, float, float | None]] = []
    for node_type, values, name in order.rows:
        calls = values.get("times called", 1.0)
        if calls < 0 or values["avg ms"] < 0:
            raise ProfileLogError(f"a negative time or call count for {name[:100]!r}")
        raw.append((name or node_type, node_type, values["avg ms"] * calls, values.get("%")))
    ops_ms = sum(ms for _, _, ms, _ in raw)
    total_ms = found.total_us / 1000.0 if found.total_us is not None else _implied(raw)
    rows = [OpRow(node=node, op_type=node_type, exec=_exec(node_type, node), ms=ms,
                  share=ms / ops_ms if ops_ms else 0.0)
            for node, node_type, ms, _ in raw]
    rows.sort(key=lambda row: -(row.ms or 0.0))
    return OpProfile(source=SOURCE, runs=found.runs, runtime_ms=total_ms, ops_ms=ops_ms,
                     rows=rows, note=NOTE)


def _implied(raw: list[tuple[str, str, float, float | None]]) -> float | None:
    """The run total the `%` column implies: the largest row's time over its share (the
    largest has the most digits of both)."""
    shares = [(ms, pct) for _, _, ms, pct in raw if pct]
    if not shares:
        return None
    ms, pct = max(shares)
    return ms / (pct / 100.0)


def by_type(text: str) -> dict[str, float]:
    """The "Summary by node type" table: ms a run per node type, as the tool summed it."""
    found = regular_runs(text)
    if found is None or "Summary by node type" not in found.tables:
        return {}
    return {node_type: values["avg ms"]
            for node_type, values, _ in found.tables["Summary by node type"].rows}
