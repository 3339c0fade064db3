"""Two targets' per-operator profiles side by side, by op type (issue 32): "why is INT8
slower here" answered by looking (docs/profiles.md, "Two targets side by side").

    A (the reference) ─┐                    op type │ A ms  share │ B ms  share │ B/A │ Δ ms
                       ├─ OpComparison ─▶   Conv    │ 4.10   61 % │ 1.20   18 % │ 0.29│ -2.90
    B (the compared) ──┘                    QLinear…│   —         │ 3.00   45 % │ only B

Which pairs a run's report shows (`pairs`), only when both have a measured profile:

1. a target with a `speedup:` gate and the target its `over` names (A = `over`);
2. targets of one target profile (`profile:`) and one backend, each against the first
   of them in recipe order (A): `host-cpu` vs `host-cpu-int8` (`profile: host-cpu`).

`edgebuild compare BASE.json HEAD.json` compares each target present in both reports
with a profile (A = base). Op-type names come from the model file (untrusted): Markdown
goes through `md_code`, HTML through `escape`.
"""

from __future__ import annotations

from html import escape

from pydantic import BaseModel, ConfigDict

from edgebuild.measure.record import OpProfile
from edgebuild.report.markdown import md, md_code
from edgebuild.report.model import Report, TargetReport

ROWS = 12  # op types listed per comparison (the largest differences first)


class OpTypeRow(BaseModel):
    """One op type in both profiles: ms per run and share of each; None where absent."""

    model_config = ConfigDict(frozen=True)

    op_type: str
    a_ms: float | None
    b_ms: float | None
    a_share: float | None
    b_share: float | None

    @property
    def ratio(self) -> float | None:
        """B's time over A's; None when the op type is in one profile only."""
        if self.a_ms is None or self.b_ms is None or self.a_ms <= 0:
            return None
        return self.b_ms / self.a_ms

    @property
    def delta_ms(self) -> float:
        return (self.b_ms or 0.0) - (self.a_ms or 0.0)


class OpComparison(BaseModel):
    """Target A's and target B's profiles by op type, the largest difference first."""

    model_config = ConfigDict(frozen=True)

    a: str  # names, as a reader sees them ("host-cpu", "base host-cpu")
    b: str
    why: str  # why these two are compared (the rule that paired them)
    a_ms: float  # the summed op time per run
    b_ms: float
    a_source: str = ""
    b_source: str = ""
    rows: list[OpTypeRow]

    @property
    def only_a(self) -> list[str]:
        return [r.op_type for r in self.rows if r.b_ms is None]

    @property
    def only_b(self) -> list[str]:
        return [r.op_type for r in self.rows if r.a_ms is None]

    @property
    def ratio(self) -> float | None:
        return self.b_ms / self.a_ms if self.a_ms > 0 else None


def measured(profile: OpProfile | None) -> bool:
    """A profile with timed rows to compare (not one saying why there is none, nor an
    estimate)."""
    return (profile is not None and not profile.unmeasurable and bool(profile.rows)
            and not profile.estimate)  # Core ML's cost shares are not times


def compare_profiles(a_name: str, a: OpProfile, b_name: str, b: OpProfile,
                     why: str) -> OpComparison:
    """The by-op-type table of two profiles (A the reference, B the compared one)."""
    a_types, b_types = a.by_type(), b.by_type()
    a_total, b_total = sum(a_types.values()), sum(b_types.values())
    rows = [OpTypeRow(op_type=kind, a_ms=a_types.get(kind), b_ms=b_types.get(kind),
                      a_share=a_types[kind] / a_total if kind in a_types and a_total else None,
                      b_share=b_types[kind] / b_total if kind in b_types and b_total else None)
            for kind in {**a_types, **b_types}]
    rows.sort(key=lambda r: (-abs(r.delta_ms), r.op_type))
    return OpComparison(a=a_name, b=b_name, why=why, a_ms=a_total, b_ms=b_total,
                        a_source=a.source or "", b_source=b.source or "", rows=rows)


def speedup_over(target: TargetReport) -> str | None:
    """The target its `speedup:` gate compares with, as the gate's result names it."""
    for gate in target.gates:
        over = gate.details.get("over") if gate.gate.startswith("speedup") else None
        if isinstance(over, str):
            return over
    return target.speedup_over


def pairs(report: Report) -> list[tuple[TargetReport, TargetReport, str]]:
    """(A, B, why) for the rules in the module's docstring, each pair once, both profiled."""
    by_name = {t.name: t for t in report.targets}
    found: list[tuple[TargetReport, TargetReport, str]] = []
    seen: set[frozenset[str]] = set()

    def add(a: TargetReport, b: TargetReport, why: str) -> None:
        key = frozenset((a.name, b.name))
        if a.name != b.name and key not in seen and measured(a.op_profile) \
                and measured(b.op_profile):
            seen.add(key)
            found.append((a, b, why))

    for target in report.targets:
        over = speedup_over(target)
        if over is not None and over in by_name:
            add(by_name[over], target, f"its speedup gate is over {over}")
    first: dict[tuple[str, str], TargetReport] = {}
    for target in report.targets:
        if not measured(target.op_profile):
            continue
        group = (target.profile, target.backend)
        if group not in first:
            first[group] = target
        else:
            add(first[group], target, f"same target profile ({target.profile}) and backend "
                f"({target.backend})")
    return found


def comparisons(report: Report) -> list[OpComparison]:
    found = []
    for a, b, why in pairs(report):
        assert a.op_profile is not None and b.op_profile is not None  # pairs() checked
        found.append(compare_profiles(a.name, a.op_profile, b.name, b.op_profile, why))
    return found


def across_reports(base: Report, head: Report) -> list[OpComparison]:
    """Each target present in both reports with a profile: base (A) against head (B)."""
    heads = {t.name: t for t in head.targets}
    found = []
    for a in base.targets:
        b = heads.get(a.name)
        if b is None or not measured(a.op_profile) or not measured(b.op_profile):
            continue
        assert a.op_profile is not None and b.op_profile is not None
        found.append(compare_profiles(f"base {a.name}", a.op_profile, f"head {b.name}",
                                      b.op_profile, "the same target in the two reports"))
    return found


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "" if value is None else f" ({value:.0%})"


def _ratio(row: OpTypeRow) -> str:
    if row.ratio is not None:
        return f"{row.ratio:.2f}×"
    return "only B" if row.a_ms is None else "only A"


def _total_ratio(c: OpComparison) -> str:
    return f"{c.ratio:.2f}×" if c.ratio is not None else "—"


def _one_side(c: OpComparison) -> list[tuple[str, list[str]]]:
    return [(name, kinds) for name, kinds in ((c.a, c.only_a), (c.b, c.only_b)) if kinds]


def markdown_lines(cs: list[OpComparison]) -> list[str]:
    """A section per comparison ([] when there is none)."""
    lines: list[str] = []
    for c in cs:
        lines += ["", f"### Per-op comparison: {md(c.a)} (A) vs {md(c.b)} (B)", "",
                  f"Why: {md(c.why)}. Summed op time {c.a_ms:.3f} vs {c.b_ms:.3f} ms a run "
                  f"(B/A {_total_ratio(c)}); largest differences first.", "",
                  "| op type | A ms a run (share) | B ms a run (share) | B/A | Δ ms |",
                  "|---|---|---|---|---|"]
        for row in c.rows[:ROWS]:
            lines.append(f"| {md_code(row.op_type)} | {_ms(row.a_ms)}{_share(row.a_share)} | "
                         f"{_ms(row.b_ms)}{_share(row.b_share)} | {_ratio(row)} | "
                         f"{row.delta_ms:+.3f} |")
        if len(c.rows) > ROWS:
            lines.append(f"| … {len(c.rows) - ROWS} more op types | | | | |")
        for name, kinds in _one_side(c):
            lines += ["", f"Only in {md(name)}: {', '.join(md_code(k) for k in kinds)}."]
    return lines


def html_section(cs: list[OpComparison]) -> str:
    """The comparisons as HTML ('' when there is none); every name escaped."""
    if not cs:
        return ""
    parts = ["<h2>Per-op comparisons</h2>"]
    for c in cs:
        parts.append(f"<h3>{escape(c.a)} (A) vs {escape(c.b)} (B)</h3>"
                     f'<p class="meta">Why: {escape(c.why)}. Summed op time {c.a_ms:.3f} vs '
                     f"{c.b_ms:.3f} ms a run (B/A {escape(_total_ratio(c))}); largest "
                     "differences first.</p>")
        rows = "".join(
            f"<tr><td><code>{escape(row.op_type)}</code></td>"
            f"<td>{_ms(row.a_ms)}{escape(_share(row.a_share))}</td>"
            f"<td>{_ms(row.b_ms)}{escape(_share(row.b_share))}</td>"
            f"<td>{escape(_ratio(row))}</td><td>{row.delta_ms:+.3f}</td></tr>"
            for row in c.rows[:ROWS])
        parts.append("<table><tr><th>op type</th><th>A ms a run (share)</th>"
                     "<th>B ms a run (share)</th><th>B/A</th><th>Δ ms</th></tr>"
                     f"{rows}</table>")
        for name, kinds in _one_side(c):
            listed = ", ".join(f"<code>{escape(k)}</code>" for k in kinds)
            parts.append(f'<p class="meta">Only in {escape(name)}: {listed}.</p>')
    return "".join(parts)


def _plain(text: str) -> str:
    """A name for the terminal: no control character (an escape sequence) from the file."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def text_lines(cs: list[OpComparison]) -> list[str]:
    """For the terminal (`edgebuild compare`, `edgebuild profile`): plain columns."""
    lines: list[str] = []
    for c in cs:
        c = c.model_copy(update={"rows": [r.model_copy(update={"op_type": _plain(r.op_type)})
                                          for r in c.rows]})
        lines += [f"  per-op: {c.a} (A) vs {c.b} (B): summed op time {c.a_ms:.3f} vs "
                  f"{c.b_ms:.3f} ms a run (B/A {_total_ratio(c)})"]
        width = max([len(r.op_type) for r in c.rows[:ROWS]] + [7])
        lines.append(f"    {'op type':<{width}}  {'A ms (share)':>16}  {'B ms (share)':>16}"
                     f"  {'B/A':>7}  {'Δ ms':>8}")
        for row in c.rows[:ROWS]:
            lines.append(f"    {row.op_type:<{width}}  "
                         f"{_ms(row.a_ms) + _share(row.a_share):>16}  "
                         f"{_ms(row.b_ms) + _share(row.b_share):>16}  {_ratio(row):>7}  "
                         f"{row.delta_ms:>+8.3f}")
        for name, kinds in _one_side(c):
            lines.append(f"    only in {_plain(name)}: {', '.join(kinds)}")
    return lines
