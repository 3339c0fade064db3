"""Render a Report as one self-contained HTML page (report.html).

Offline by construction: inline CSS, inline SVG (edgebuild/report/svg.py), no
script, no font, no remote URL. Every string that comes from the report goes
through `escape`; the only links are in-page anchors and the artifact's path
relative to the report. Sections, in reading order: header and verdict, the
accuracy/latency trade-off across targets, one section per target (gates,
latency samples, search candidates, backend notes), the baseline comparison,
failed stages, and the build graph.
"""

from __future__ import annotations

import re
from html import escape

from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.report import opcompare, svg
from edgebuild.report.model import Report, SearchReport, TargetReport
from edgebuild.report.profile import html_section as op_profile_section
from edgebuild.report.profile import serving_section
from edgebuild.report.render import _contained, _verdict, adds

STATUS_TEXT = {GateStatus.PASSED: "pass", GateStatus.FAILED: "FAIL",
               GateStatus.UNMEASURABLE: "not measurable", GateStatus.NOT_RUN: "not run",
               GateStatus.UNDECIDED: "undecided"}
# Measured values too long or too internal for the gate table (samples are plotted).
HIDDEN = ("samples", "n", "reference_top1", "std", "near_zero_samples", "classes", "channels")
# Accuracy metrics a trade-off plot can use, in order of preference (all: higher is better).
ACCURACY_METRICS = {"top1_agreement": "top-1 agreement, %", "top1": "top-1, %",
                    "cosine": "cosine similarity", "psnr": "PSNR, dB"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;
 margin:0;background:#f5f6f8}
main{max-width:1240px;margin:0 auto;padding:16px 20px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;
 border-bottom:1px solid #d5d9e0;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
section.target{background:#fff;border:1px solid #d5d9e0;border-radius:8px;padding:4px 16px 12px;
 margin:14px 0}
table{border-collapse:collapse;margin:6px 0;background:#fff}
th,td{border:1px solid #d5d9e0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f0f2f5;padding:8px;overflow-x:auto;white-space:pre-wrap}
.verdict{display:inline-block;padding:3px 10px;border-radius:12px;font-weight:600;color:#fff}
.ok{background:#1f883d}.bad{background:#cf222e}
.meta{color:#57606a}.meta span{margin-right:16px}
td.barcell{width:160px}.bar{height:10px;background:#6f42c1}
.status{font-weight:600;white-space:nowrap}
.status.passed{color:#1a7f37}.status.failed,.status.not-run{color:#cf222e}
.status.unmeasurable,.status.undecided{color:#9a6700}
.status.chosen{color:#1a7f37}.status.rejected{color:#cf222e}
tr.failed td,tr.not-run td{background:#fff1f0}tr.unmeasurable td,tr.undecided td{background:#fff8e1}
.chip{display:inline-block;border-radius:9px;padding:0 7px;margin:1px;font-size:12px;color:#fff}
.chip.passed{background:#1f883d}.chip.failed,.chip.not-run{background:#cf222e}
.chip.unmeasurable,.chip.undecided{background:#bf8700}
.legend{color:#57606a;font-size:12.5px;margin:4px 0}
.swatch{display:inline-block;width:12px;height:12px;border:1px solid #8c959f;border-radius:3px;
 vertical-align:-2px;margin:0 4px 0 10px}
.scroll{overflow-x:auto}
svg.plot{display:block;background:#fff;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#1d232b}
svg .tick{fill:#57606a;font-size:10.5px}svg .axis-label{fill:#57606a}
svg .axis{stroke:#8c959f}svg .grid{stroke:#e4e7eb}
svg .sample{fill:#0969da;fill-opacity:.35}
svg .box{fill:#ddf4ff;stroke:#0969da}svg .median{stroke:#0a3069;stroke-width:2.5}
svg .whisker{stroke:#0969da}
svg .gated{stroke:#8250df;stroke-width:2}svg .mark-gated{fill:#8250df;font-weight:600}
svg .budget{stroke:#cf222e;stroke-width:2;stroke-dasharray:5 3}
svg .mark-budget{fill:#cf222e;font-weight:600}svg .over-budget{fill:#cf222e;fill-opacity:.06}
svg .point{fill:#54aeff;fill-opacity:.7;stroke:#0969da}
svg .point.front{fill:#1f883d;stroke:#0a3622;stroke-width:2}
svg .point.chosen{stroke:#000;stroke-width:3}
svg .point.rejected,svg .point.failed,svg .point.unmeasurable{fill:#d0d7de;stroke:#8c959f}
svg .front-line{fill:none;stroke:#1f883d;stroke-dasharray:4 3}svg .leader{stroke:#afb8c1}
svg .ci{stroke-width:3}svg .ci.ok,svg .ratio.ok{stroke:#1f883d;fill:#1f883d}
svg .ci.regression,svg .ratio.regression{stroke:#cf222e;fill:#cf222e}
svg .ci.undecided,svg .ratio.undecided{stroke:#bf8700;fill:#bf8700}
svg .edge{fill:none;stroke:#8c959f}svg .arrow{fill:#8c959f}
svg .stage rect,.swatch{fill:#eaeef2;stroke:#8c959f}svg .stage .op{font-weight:600}
svg .stage.built rect,.swatch.built{fill:#dafbe1;stroke:#1a7f37;background:#dafbe1}
svg .stage.cached rect,.swatch.cached{fill:#ddf4ff;stroke:#54aeff;background:#ddf4ff}
svg .stage.failed rect,.swatch.failed{fill:#ffebe9;stroke:#cf222e;stroke-width:2;
 background:#ffebe9}
svg .stage.unmeasurable rect,.swatch.unmeasurable{fill:#fff8c5;stroke:#bf8700;
 background:#fff8c5}
svg .stage.skipped rect,.swatch.skipped{fill:#f6f8fa;stroke-dasharray:4 3;background:#f6f8fa}
"""


def html_page(report: Report) -> str:
    """The whole page; pure function of the report."""
    verdict = _verdict(report)
    good = report.exit_code == 0
    body = [f"<h1>edgebuild: {escape(report.recipe)} "
            f'<span class="verdict {"ok" if good else "bad"}">{escape(verdict)}</span></h1>',
            _header(report), _overview(report), _tradeoff(report)]
    body += [_target(report, t) for t in report.targets]
    body.append(opcompare.html_section(opcompare.comparisons(report)))
    body += [_baseline(report), _failed(report), _graph(report)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>edgebuild: {escape(report.recipe)} — {escape(verdict)}</title>"
            f"<style>{CSS}</style></head>\n<body><main>\n"
            + "\n".join(b for b in body if b) + "\n</main></body></html>\n")


def _header(report: Report) -> str:
    counts = ", ".join(f"{n} {escape(k)}" for k, n in report.counts.items() if n)
    machine = ", ".join(f"{escape(str(k))} {escape(str(v))}" for k, v in report.machine.items())
    return ('<p class="meta">'
            f"<span>exit code <b>{report.exit_code}</b></span>"
            f"<span>stages: {counts or 'none'}</span>"
            f"<span>{report.seconds:.1f} s, started {escape(report.started)}</span>"
            f"<span>edgebuild {escape(report.edgebuild_version)}</span><br>"
            f"<span>recipe <code>{escape(report.recipe_file)}</code></span>"
            f"<span>machine: {machine or 'unknown'}</span></p>")


def _anchor(name: str) -> str:
    return "t-" + re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _overview(report: Report) -> str:
    rows = []
    for t in report.targets:
        chips = "".join(f'<span class="chip {g.status.value}" title="{escape(g.message)}">'
                        f"{escape(g.gate)}</span>" for g in t.gates) or "no gates"
        size = f"{t.size_bytes / 1e6:.3g} MB" if t.size_bytes is not None else "—"
        rows.append(f'<tr><td><a href="#{_anchor(t.name)}">{escape(t.name)}</a></td>'
                    f"<td>{escape(t.profile)}</td><td>{escape(t.backend)}</td>"
                    f"<td>{escape(t.format or '—')}</td><td>{escape(t.precision or '—')}</td>"
                    f"<td class=\"num\">{size}</td><td>{chips}</td></tr>")
    return ("<h2>Targets</h2><table><tr><th>target</th><th>profile</th><th>backend</th>"
            "<th>format</th><th>precision</th><th>size</th><th>gates</th></tr>"
            + "".join(rows) + "</table>")


def _latency_gate(gates: list[GateResult]) -> GateResult | None:
    return next((g for g in gates if g.is_latency), None)


def _accuracy_values(gates: list[GateResult]) -> dict[str, float]:
    found: dict[str, float] = {}
    for gate in gates:
        if gate.gate.startswith("accuracy"):
            found.update({k: v for k, v in gate.measured.items()
                          if k in ACCURACY_METRICS and k not in found})
    return found


def pick_metric(rows: list[dict[str, float]]) -> str | None:
    """The accuracy metric most rows have (ties: the preferred one)."""
    have = {m: sum(1 for r in rows if m in r) for m in ACCURACY_METRICS}
    best = max(have, key=lambda m: (have[m], -list(ACCURACY_METRICS).index(m)))
    return best if have[best] else None


def _tradeoff(report: Report) -> str:
    points: list[tuple[str, float, dict[str, float], float | None]] = []
    for t in report.targets:
        latency = _latency_gate(t.gates)
        p50 = latency.measured.get("p50") if latency is not None else None
        if p50 is not None and p50 > 0:
            size = t.size_bytes / 1e6 if t.size_bytes is not None else None
            points.append((t.name, p50, _accuracy_values(t.gates), size))
    metric = pick_metric([p[2] for p in points]) if points else None
    if metric is None:
        return ""
    shown = [svg.Point(name, p50, values[metric], size)
             for name, p50, values, size in points if metric in values]
    missing = [name for name, _, values, _ in points if metric not in values]
    if len(shown) < 2:
        return ""
    note = (f" Not shown (no {escape(metric)}): {escape(', '.join(missing))}." if missing else "")
    return ("<h2>Accuracy against latency</h2>"
            f'<p class="legend">Each target at its median latency (p50); circle area by artifact '
            f"size. Green, ringed and joined by the dashed line: the Pareto front (no other "
            f"target is both faster and at least as accurate).{note}</p>"
            + svg.scatter(shown, "p50 latency, ms", ACCURACY_METRICS[metric]))


def _number(value: float) -> str:
    return format(value, ".4g")


def _gate_table(gates: list[GateResult]) -> str:
    rows = []
    for g in gates:
        measured = ", ".join(f"{escape(k)} {_number(v)}" for k, v in g.measured.items()
                             if k not in HIDDEN)
        limits = ", ".join(f"{escape(k)} {_number(v)}" for k, v in g.limits.items())
        failing = " (fails the run)" if g.counts_as_failure and g.status in (
            GateStatus.UNMEASURABLE, GateStatus.UNDECIDED) else ""
        rows.append(f'<tr class="{g.status.value}"><td>{escape(g.gate)}</td>'
                    f'<td class="status {g.status.value}">{STATUS_TEXT[g.status]}{failing}</td>'
                    f"<td>{measured or '—'}</td><td>{limits or '—'}</td>"
                    f"<td>{escape(g.message)}</td></tr>")
    return ("<table><tr><th>gate</th><th>result</th><th>measured</th><th>limit</th>"
            "<th>message</th></tr>" + "".join(rows) + "</table>")


def flips_table(gate: GateResult) -> str:
    """An accuracy gate's top-1 flips, the most decided by FP32 first."""
    flips = gate.details.get("flips") or []
    rows = "".join(
        f"<tr><td>{int(f['sample'])}</td><td>{float(f['fp32_margin']):.3g}</td>"
        f"<td>{int(f['fp32_class'])}</td><td>{int(f['class'])}</td>"
        f"<td>{ {True: 'yes', False: 'no'}.get(f.get('decided'), '—')}</td></tr>"
        for f in flips)
    total = int(gate.measured.get("flips", len(flips)))
    return (f"<details><summary>{escape(gate.gate)}: {total} top-1 flip(s) against FP32, "
            "by FP32's top-1 − top-2 margin</summary><table><tr><th>sample</th>"
            "<th>FP32 margin</th><th>FP32 class</th><th>class</th><th>decided</th></tr>"
            f"{rows}</table></details>")


def _latency_section(gate: GateResult) -> str:
    samples = [float(v) for v in gate.details.get("samples_ms") or []
               if isinstance(v, int | float) and v > 0]
    percentile = gate.limits.get("percentile")
    key = f"p{percentile:g}" if percentile is not None else ""
    gated = (key, gate.measured[key]) if key in gate.measured else None
    if not samples:
        return ('<p class="legend">No latency samples in the report (the measurement came '
                "from a device tool, or was not made).</p>")
    n = gate.measured.get("n")
    total = f" of {n:.0f}" if n is not None else ""
    profile = gate.details.get("profile")
    title = f" — profile {escape(str(profile))}" if profile else ""
    return (f"<h3>Latency samples{title}</h3>"
            f'<p class="legend">{len(samples)}{total} timed runs (evenly subsampled, in time '
            "order): dots jittered vertically; the box spans the quartiles with the median, "
            "whiskers reach 1.5 × IQR. Purple: the gated percentile over all runs; red dashed: "
            "the budget.</p>" + svg.latency_plot(samples, gate.limits.get("budget_ms"), gated))


def _target(report: Report, t: TargetReport) -> str:
    artifact = (f' — artifact <a href="{escape(t.artifact)}"><code>{escape(t.artifact)}</code></a>'
                if t.artifact else " — no artifact")
    parts = [f'<section class="target" id="{_anchor(t.name)}"><h2>{escape(t.name)}</h2>',
             f'<p class="meta">profile {escape(t.profile)}, backend {escape(t.backend)}, '
             f"format {escape(t.format or '—')}{artifact}</p>"]
    if t.model is not None and not t.model.empty:  # the ONNX file wrote it: escaped
        parts.append(f'<p class="meta">model metadata: {escape(t.model.summary())}</p>')
    parts.append(_gate_table(t.gates) if t.gates else "<p>No gates.</p>")
    parts.extend(flips_table(g) for g in t.gates if g.details.get("flips"))
    for latency in (g for g in t.gates if g.is_latency):  # one per shape profile
        if latency.status is not GateStatus.NOT_RUN:
            parts.append(_latency_section(latency))
    parts.append(op_profile_section(t))  # '' without a profile or memory figure
    parts.append(serving_section(t))  # '' unless a served model was measured
    if t.search is not None:
        parts.append(_search(t.name, t.search))
    for file, text in t.notes.items():
        title, _, rest = text.strip().partition("\n")
        if not title.startswith("#"):
            title, rest = file, text
        parts.append(f"<details open><summary><b>{escape(title.lstrip('# '))}</b> "
                     f'<span class="meta">({escape(file)})</span></summary>'
                     f"{markdown_to_html(rest)}</details>")
    return "".join(parts) + "</section>"


def _search(name: str, search: SearchReport) -> str:
    rows = []
    for c in search.candidates:
        def num(v: float | None, digits: str = ".4g") -> str:
            return "—" if v is None else format(v, digits)
        ratio = "—" if c.ratio is None else (
            "1 (fastest)" if c.chosen else f"×{c.ratio:.2f}" + (
                f" [{c.ratio_ci95[0]:.2f}–{c.ratio_ci95[1]:.2f}]" if c.ratio_ci95 else ""))
        rows.append(f'<tr class="{escape(c.state)}"><td class="status {escape(c.state)}">'
                    f"{escape(c.state)}{' ◆' if c.pareto else ''}</td>"
                    f"<td><code>{escape(c.name)}</code></td><td>{escape(adds(c))}</td>"
                    f'<td class="num">{num(c.p50_ms, ".3g")}</td>'
                    f'<td class="num">{num(c.p90_ms, ".3g")}</td><td>{ratio}</td>'
                    f'<td class="num">{num(c.top1_agreement)}</td>'
                    f'<td class="num">{num(c.top1)}</td><td class="num">{num(c.cosine)}</td>'
                    f'<td class="num">{num(c.size_mb, ".3g")}</td><td>{escape(c.reason)}</td>'
                    "</tr>")
    values = [{k: v for k, v in (("top1_agreement", c.top1_agreement), ("top1", c.top1),
                                 ("cosine", c.cosine)) if v is not None}
              for c in search.candidates]
    metric = pick_metric(values)
    plot = ""
    points = [svg.Point(c.name, c.p50_ms, v[metric], c.size_mb,
                        "chosen" if c.chosen else c.state, c.state)
              for c, v in zip(search.candidates, values, strict=True)
              if metric is not None and metric in v and c.p50_ms is not None and c.p50_ms > 0]
    if len(points) >= 2 and metric is not None:
        plot = (f'<p class="legend">Candidates by p50 latency and {escape(metric)}; the chosen '
                "one has a black ring, grey ones were rejected, green ones are on the Pareto "
                "front.</p>" + svg.scatter(points, "p50 latency, ms", ACCURACY_METRICS[metric]))
    return (f"<h3>Search: {escape(search.message)}</h3>"
            f'<p class="legend">{len(search.candidates)} candidates in {search.seconds:.0f} s '
            f"(at most {search.max_candidates}); ◆ on the Pareto front of p50 vs agreement; "
            "<i>vs chosen</i> is the interleaved ratio with its 95 % CI.</p>"
            '<div class="scroll"><table><tr><th>state</th><th>candidate</th><th>adds</th>'
            "<th>p50 ms</th><th>p90 ms</th><th>vs chosen</th><th>agreement %</th>"
            "<th>top-1 %</th><th>cosine</th><th>MB</th><th>why not</th></tr>"
            + "".join(rows) + "</table></div>" + plot)


def _baseline(report: Report) -> str:
    gates = [g for g in report.gates if g.gate == "regression"]
    if not gates:
        return ""
    rows, plotted = [], []
    for g in gates:
        ci = g.details.get("ci95") or [float("nan")] * 2
        threshold = float(g.details.get("threshold", g.limits.get("max_regression_pct", 0) / 100))
        base, head = g.measured.get("baseline_p50"), g.measured.get("candidate_p50")
        ratio = g.measured.get("ratio", float("nan"))
        decision = str(g.details.get("decision", g.status.value))
        plotted.append((g.target, ratio, float(ci[0]), float(ci[1]), 1 + threshold, decision))
        rows.append(f'<tr class="{g.status.value}"><td>{escape(g.target)}</td>'
                    f'<td class="num">{"—" if base is None else _number(base)}</td>'
                    f'<td class="num">{"—" if head is None else _number(head)}</td>'
                    f'<td class="num">×{ratio:.3f} [{float(ci[0]):.3f}–{float(ci[1]):.3f}]</td>'
                    f'<td class="num">{threshold:.0%}</td>'
                    f'<td class="status {g.status.value}">{escape(decision)}</td>'
                    f"<td>{escape(g.message)}</td></tr>")
    return ("<h2>Against the baseline</h2>"
            '<p class="legend">The baseline\'s artifact and this build\'s, timed interleaved in '
            "one process (<code>run --baseline</code>). Dot: median of the per-block ratios; "
            "bar: its 95 % CI; red dashed tick: the regression threshold.</p>"
            "<table><tr><th>target</th><th>baseline p50 ms</th><th>this p50 ms</th>"
            "<th>ratio [95 % CI]</th><th>threshold</th><th>decision</th><th>message</th></tr>"
            + "".join(rows) + "</table>" + svg.ratio_plot(plotted))


def _failed(report: Report) -> str:
    failed = [s for s in report.stages if s.outcome == "failed"]
    if not failed:
        return ""
    contained = _contained(report)
    rows = [f"<tr><td><code>{escape(s.id)}</code></td><td>{escape(s.message)}"
            + (" <i>(a search candidate; the search chose another)</i>"
               if s.id in contained else "")
            + (f"<br><b>hint:</b> {escape(s.hint)}" if s.hint else "")
            + f"</td><td><code>{escape(s.log or '—')}</code></td></tr>" for s in failed]
    return ("<h2>Failed stages</h2><table><tr><th>stage</th><th>message</th><th>log</th></tr>"
            + "".join(rows) + "</table>")


def _graph(report: Report) -> str:
    if not report.stages:
        return ""
    nodes = [svg.Node(s.id, list(s.inputs), s.outcome,
                      f"{s.seconds:.1f} s" + (f"; {s.message}" if s.message else ""))
             for s in report.stages]
    legend = "".join(f'<span class="swatch {k}"></span>{k}'
                     for k in ("built", "cached", "failed", "unmeasurable", "skipped"))
    edges = "" if any(s.inputs for s in report.stages) else (
        " This report predates recorded stage inputs: no edges are drawn.")
    rows = "".join(f'<tr class="{escape(s.outcome)}"><td><code>{escape(s.id)}</code></td>'
                   f"<td>{escape(s.outcome)}</td><td class=\"num\">{s.seconds:.2f}</td>"
                   f"<td>{escape(', '.join(s.inputs))}</td><td>{escape(s.worker or '')}</td>"
                   f"<td>{escape(s.message)}</td></tr>" for s in report.stages)
    return ("<h2>Build graph</h2>"
            f'<p class="legend">Stages left to right by depth; hover one for its time and '
            f"message.{legend}{edges}</p>"
            f'<div class="scroll">{svg.dag(nodes)}</div>'
            f"<details><summary>All {len(report.stages)} stages</summary><table><tr>"
            "<th>stage</th><th>outcome</th><th>seconds</th><th>inputs</th><th>worker</th>"
            f"<th>message</th></tr>{rows}</table></details>")


_TABLE_RULE = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def _inline(text: str) -> str:
    """Escaped text with `code`, **bold** and *italic*."""
    out = escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"<i>\1</i>", out)


_CELL_TOKEN = re.compile(r"\\[|\\]|\||[^|\\]+|\\")


def _cells(line: str) -> list[str]:
    """A table row's cells; `\\|` is a pipe inside a cell (a node name holding one)."""
    cells, current = [], ""
    for token in _CELL_TOKEN.findall(line.strip()):
        if token == "|":
            cells.append(current)
            current = ""
        else:
            current += token[1] if len(token) == 2 else token
    cells.append(current)
    if line.strip().startswith("|"):
        cells = cells[1:]
    if len(cells) > 1 and not cells[-1].strip():
        cells = cells[:-1]
    return [c.strip() for c in cells]


def markdown_to_html(text: str) -> str:
    """A tiny Markdown subset, enough for the notes backends write: headings, tables,
    bullet lists, fenced code, paragraphs. Anything else stays text (escaped)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")),
                       len(lines))
            out.append(f"<pre>{escape(chr(10).join(lines[i + 1:end]))}</pre>")
            i = end + 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 2, 6)
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(
                lines[i + 1].strip()):
            head = "".join(f"<th>{_inline(c)}</th>" for c in _cells(line))
            i += 2
            body = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                body.append("<tr>" + "".join(f"<td>{_inline(c)}</td>"
                                             for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")
        elif re.match(r"\s*[-*] ", line):
            items = []
            while i < len(lines) and re.match(r"\s*[-*] ", lines[i]):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not re.match(
                    r"(#|```|\s*\||\s*[-*] )", lines[i]):
                para.append(lines[i].strip())
                i += 1
            if not para:  # a lone table-looking line without its rule: keep it as text
                para.append(lines[i])
                i += 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
    return "\n".join(out)
