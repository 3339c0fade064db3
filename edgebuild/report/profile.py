"""The per-operator profile and the memory figure of each target, in summary.md and
report.html (docs/profiles.md explains how to read them).

Node and op-type names come from the model file (untrusted): Markdown goes through
`md`/`md_code`, HTML through `escape`, and a bar's width is a number computed here.
"""

from __future__ import annotations

from html import escape

from edgebuild.measure.record import Memory, OpProfile
from edgebuild.report.markdown import md, md_code
from edgebuild.report.model import Report, TargetReport

TOP = 10  # operators listed by time
TYPES = 8  # op types listed


def ms_text(ms: float | None) -> str:
    """A row's ms a run; '—' where the profile has no time (Core ML's estimate)."""
    return "—" if ms is None else f"{ms:.3f}"


def measured_line(profile: OpProfile) -> str:
    """One line: where the profile comes from and how it adds up."""
    if profile.estimate:
        return f"{profile.source or 'profile'}: estimated cost shares, not times"
    parts = [profile.source or "profile", f"{profile.runs or 0} runs"]
    if profile.threads:
        parts.append(f"{profile.threads} thread(s)")
    if profile.ops_ms is not None and profile.wall_ms:
        parts.append(f"ops {profile.ops_ms:.3f} ms of {profile.wall_ms:.3f} ms a run "
                     f"({profile.ops_ms / profile.wall_ms:.0%})")
    if profile.cycles is not None:
        parts.append(f"{profile.cycles} HTP cycles a run")
    return ", ".join(parts)


def memory_text(memory: Memory) -> str:
    if memory.peak_mb is None:
        return memory.unmeasurable or "not measured"
    extra = (f" (loaded: {memory.init_mb:.1f} MB; the Python process around it "
             f"{memory.process_peak_mb:.0f} MB)" if memory.init_mb is not None
             and memory.process_peak_mb is not None else "")
    return f"runtime peak {memory.peak_mb:.1f} MB for load + inference{extra}"


def by_type_rows(profile: OpProfile) -> list[tuple[str, float | None, float]]:
    """(op type, ms a run or None for an estimate, share) of the TYPES largest."""
    total = profile.ops_ms or 0.0
    found = list(profile.by_type().items())[:TYPES]
    if profile.estimate:
        return [(kind, None, value) for kind, value in found]
    return [(kind, ms, ms / total if total else 0.0) for kind, ms in found]


def markdown_lines(report: Report) -> list[str]:
    """A section per target that has a profile or a memory figure ([] when none has)."""
    lines: list[str] = []
    for target in report.targets:
        profile, memory = target.op_profile, target.memory
        if profile is None and memory is None:
            continue
        lines += ["", f"### Where the time and memory go: {md(target.name)}", ""]
        if memory is not None:
            lines += [f"Memory: {md(memory_text(memory))}.", ""]
        if profile is None:
            continue
        if profile.unmeasurable:
            lines += [f"Profile: {md(profile.unmeasurable)}."]
            continue
        lines += [f"Profile: {md(measured_line(profile))}.", ""]
        if profile.note:  # what the rows do not say (TFLite: no ONNX node mapped)
            lines += [f"Note: {md(profile.note)}.", ""]
        lines += ["| op type | ms a run | share |", "|---|---|---|"]
        for kind, ms, share in by_type_rows(profile):
            lines.append(f"| {md_code(kind)} | {ms_text(ms)} | {share:.0%} |")
        lines += ["", "| node | op type | kernel / provider | ms a run | share | ONNX nodes |",
                  "|---|---|---|---|---|---|"]
        for row in profile.top(TOP):
            nodes = ", ".join(row.onnx_nodes or []) or "—"
            fused = " (fused group)" if row.fused else ""
            lines.append(f"| {md_code(row.node)} | {md_code(row.op_type)} | "
                         f"{md(row.exec or '—')} | {ms_text(row.ms)} | {row.share:.0%} | "
                         f"{md(nodes)}{fused} |")
    return lines


def _bar(share: float) -> str:
    width = max(0.0, min(100.0, share * 100))
    return (f'<div class="bar" style="width:{width:.1f}%" title="{width:.1f} %">'
            "</div>")


def html_section(t: TargetReport) -> str:
    """The target's profile and memory as HTML ('' when it has neither)."""
    profile, memory = t.op_profile, t.memory
    if profile is None and memory is None:
        return ""
    parts = ["<h3>Where the time and memory go</h3>"]
    if memory is not None:
        parts.append(f'<p class="meta">Memory: {escape(memory_text(memory))}.</p>')
    if profile is None:
        return "".join(parts)
    if profile.unmeasurable:
        parts.append(f'<p class="meta">Profile: {escape(profile.unmeasurable)}.</p>')
        return "".join(parts)
    parts.append(f'<p class="meta">Profile: {escape(measured_line(profile))}. Bars: share of '
                 "the summed op time.</p>")
    if profile.note:
        parts.append(f'<p class="meta">Note: {escape(profile.note)}.</p>')
    rows = "".join(
        f"<tr><td><code>{escape(kind)}</code></td><td>{ms_text(ms)}</td>"
        f'<td class="barcell">{_bar(share)}</td></tr>'
        for kind, ms, share in by_type_rows(profile))
    parts.append("<table><tr><th>op type</th><th>ms a run</th><th>share</th></tr>"
                 f"{rows}</table>")
    rows = "".join(
        f"<tr><td><code>{escape(row.node)}</code></td><td><code>{escape(row.op_type)}</code>"
        f"</td><td>{escape(row.exec or '—')}</td><td>{ms_text(row.ms)}</td>"
        f'<td class="barcell">{_bar(row.share)}</td>'
        f"<td>{escape(', '.join(row.onnx_nodes or []) or '—')}"
        f"{' <em>(fused group)</em>' if row.fused else ''}</td></tr>"
        for row in profile.top(TOP))
    parts.append(f"<table><tr><th>top {TOP} operators</th><th>op type</th>"
                 "<th>kernel / provider</th><th>ms a run</th><th>share</th>"
                 f"<th>ONNX nodes</th></tr>{rows}</table>")
    return "".join(parts)


def serving_section(t: TargetReport) -> str:
    """A served model's sweep and where each request's time went on the server, per
    composing model (queue, compute input, infer, output; µs a request) — '' without one."""
    serving = t.serving
    if serving is None or not serving.levels:
        return ""
    parts = ["<h3>Serving: where the time goes</h3>",
             f'<p class="meta">{escape(serving.server or "server")}, model '
             f"<code>{escape(serving.model)}</code>; load from "
             f"<code>{escape(serving.command or '')}</code>. Client percentiles in ms; "
             "server times in µs per request, from its own statistics.</p>"]
    rows = "".join(
        f"<tr><td>{level.concurrency}</td><td>{level.fps:.1f}</td><td>{ms_text(level.p50)}"
        f"</td><td>{ms_text(level.p90)}</td><td>{ms_text(level.p99)}</td></tr>"
        for level in serving.levels)
    parts.append("<table><tr><th>concurrency</th><th>infer/s</th><th>p50 ms</th>"
                 f"<th>p90 ms</th><th>p99 ms</th></tr>{rows}</table>")
    rows = "".join(
        f"<tr><td>{level.concurrency}</td><td><code>{escape(step.model)}</code></td>"
        f"<td>{step.requests}</td><td>{step.queue_us:.1f}</td>"
        f"<td>{step.compute_input_us:.1f}</td><td>{step.compute_infer_us:.1f}</td>"
        f"<td>{step.compute_output_us:.1f}</td></tr>"
        for level in serving.levels for step in level.steps)
    parts.append("<table><tr><th>concurrency</th><th>model</th><th>requests</th>"
                 "<th>queue µs</th><th>compute input µs</th><th>compute infer µs</th>"
                 f"<th>compute output µs</th></tr>{rows}</table>")
    return "".join(parts)
