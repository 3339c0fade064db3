"""Render a Report as Markdown (for PR comments / CI step summaries) and JUnit XML.

summary.md lands in a CI step summary, so nothing a recipe or a data file wrote may
act as Markup there: a dataset named `<script>…|[x](javascript:…)` or a label line
holding `<img src=…>` must read as the text it is. Every such value goes through `md`
(or `md_code`; report/markdown.py); only the renderer's own `<details>`, tables and
emphasis are markup.
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.report import opcompare
from edgebuild.report.markdown import md, md_block, md_code
from edgebuild.report.model import CandidateReport, Report, SearchReport
from edgebuild.report.profile import markdown_lines as profile_lines

ICONS = {GateStatus.PASSED: "✅ pass", GateStatus.FAILED: "❌ FAIL",
         GateStatus.UNMEASURABLE: "⚠️ not measurable", GateStatus.NOT_RUN: "❌ not run",
         GateStatus.UNDECIDED: "⚠️ undecided"}


def could_not_time(report: Report) -> str:
    """One line naming the figures a busy machine kept from being timed, or ''."""
    busy = [g.name for g in report.gates if g.busy]
    return f"could not time: {', '.join(busy)} (machine busy)" if busy else ""


def _verdict(report: Report) -> str:
    """The headline: what failed, what could not be timed; never "a gate failed" for a
    run whose only trouble was a busy machine."""
    untimed = could_not_time(report)
    others = [g for g in report.gates if g.status is not GateStatus.PASSED and not g.busy]
    failed = [g for g in report.gates if g.counts_as_failure and not g.busy]
    if report.exit_code == 1 and untimed and not failed:  # policy.unmeasurable: fail
        return f"{untimed}; policy.unmeasurable fails the run"
    if report.exit_code == 0 and (others or untimed):  # the policy warns
        parts = ["no gate failed"] + ([untimed] if untimed else [])
        if others:
            parts.append(f"{len(others)} undecided or not measurable (see Details)")
        return "; ".join(parts) if untimed else ", ".join(parts)
    verdict = {0: "all gates passed", 1: "a gate failed", 3: "a stage failed"}.get(
        report.exit_code, f"exit {report.exit_code}")
    return f"{verdict}; {untimed}" if untimed else verdict


def _contained(report: Report) -> set[str]:
    """Stages of candidates whose search still chose one: their failure fails nothing."""
    return {sid for t in report.targets if t.search is not None and t.search.chosen
            for row in t.search.candidates for sid in row.stages}


def markdown(report: Report) -> str:
    built = report.counts.get("built", 0)
    cached = report.counts.get("cached", 0)
    lines = [
        f"## edgebuild: {md_code(report.recipe)} — {_verdict(report)}",
        "",
        f"{built} stage(s) built, {cached} cached, in {report.seconds:.1f} s.",
        "",
        "| target | gate | result | measured | limit |",
        "|---|---|---|---|---|",
    ]
    for target in report.targets:
        if not target.gates:
            lines.append(f"| {md(target.name)} | — | no gates | | |")
        for gate in target.gates:
            measured = ", ".join(f"{k} {v:.4g}" for k, v in gate.measured.items()
                                 if k not in ("samples", "n", "reference_top1", "std"))
            limits = ", ".join(f"{k} {v:g}" for k, v in gate.limits.items())
            lines.append(f"| {md(target.name)} | {md(gate.gate)} | {ICONS[gate.status]} | "
                         f"{md(measured or gate.message)} | {md(limits)} |")
    lines += model_lines(report)
    lines += precision_lines(report)
    for target in report.targets:
        if target.search is not None:
            lines += ["", *search_table(target.name, target.search)]
    for target in report.targets:
        for text in target.notes.values():
            title, _, body = text.strip().partition("\n")
            lines += ["", f"<details><summary>{md(target.name)}: "
                      f"{md(title.lstrip('# '))}</summary>", "", md_block(body.strip()), "",
                      "</details>"]
    failed = [s for s in report.stages if s.outcome == "failed"]
    if failed:
        contained = _contained(report)
        lines += ["", "### Failed stages", ""]
        lines += [f"- {md_code(s.id)}: {md(s.message)} (log: {md_code(s.log)})" +
                  (" — a search candidate; the search chose another" if s.id in contained
                   else "") for s in failed]
    for target in report.targets:
        lines += flips_section(target.gates)
    lines += profile_lines(report)
    lines += opcompare.markdown_lines(opcompare.comparisons(report))
    notes = [g for g in report.gates if g.status is not GateStatus.PASSED]
    if notes:
        lines += ["", "### Details", ""]
        lines += [f"- **{md(g.name)}**: {md(g.message)}" for g in notes]
    return "\n".join(lines) + "\n"


def model_lines(report: Report) -> list[str]:
    """The line "Model metadata … (targets): task detect, 80 classes (…), stride 32", once per
    distinct metadata (one ONNX source: one line naming every target). The file wrote it:
    every value is escaped."""
    by_summary: dict[str, list[str]] = {}
    for target in report.targets:
        if target.model is not None and not target.model.empty:
            by_summary.setdefault(target.model.summary(), []).append(target.name)
    return ["", *(f"Model metadata from the ONNX file ({md(', '.join(names))}): {md(text)}"
                  for text, names in by_summary.items())] if by_summary else []


def precision_lines(report: Report) -> list[str]:
    """"Precision: `intel-cpu` f32; `intel-cpu-bf16` bf16 requested; this CPU has no
    native bf16 (…): ran as f32" — the targets whose backend read its precision back."""
    labelled = [t for t in report.targets if t.precision]
    if not labelled:
        return []
    return ["", "Precision (as run on the build host): " +
            "; ".join(f"{md_code(t.name)} {md(t.precision)}" for t in labelled)]


def flips_section(gates: list[GateResult]) -> list[str]:
    """Each accuracy gate's top-1 flips, the most decided by FP32 first: a flip where FP32's
    top two nearly tie says nothing; one where FP32 was sure is the build's error."""
    lines: list[str] = []
    for gate in gates:
        flips = gate.details.get("flips") or []
        if not flips:
            continue
        total = int(gate.measured.get("flips", len(flips)))
        shown = f" (the first {len(flips)})" if total > len(flips) else ""
        lines += ["", f"<details><summary>{md(gate.name)}: {total} top-1 flip(s) against FP32, "
                  f"by FP32's top-1 − top-2 margin{shown}</summary>", "",
                  "| gate | sample | FP32 margin | FP32 class | class | decided |",
                  "|---|---|---|---|---|---|"]
        for f in flips:
            decided = {True: "yes", False: "no"}.get(f.get("decided"), "—")
            lines.append(f"| {md(gate.name)} | {f['sample']} | {f['fp32_margin']:.3g} | "
                         f"{f['fp32_class']} | {f['class']} | {decided} |")
        lines += ["", "</details>"]
    return lines


STATE_ICONS = {"chosen": "✅ **chosen**", "passed": "✅ passed", "rejected": "❌ rejected",
               "failed": "💥 failed", "unmeasurable": "⚠️ unmeasurable",
               "not-tried": "⏭️ not tried"}


def _number(value: float | None, digits: str = ".3g") -> str:
    return "—" if value is None else format(value, digits)


def _ratio(row: CandidateReport) -> str:
    if row.ratio is None:
        return "—"
    if row.chosen:
        return "1 (fastest)"
    low, high = row.ratio_ci95 or (row.ratio, row.ratio)
    return f"×{row.ratio:.2f} [{low:.2f}–{high:.2f}]"


def adds(row: CandidateReport) -> str:
    """A candidate's "adds" cell: what it adds, and the precision its build runs in when
    the backend read that back (a precision search compares labels, not option names)."""
    return f"{row.summary}; runs {row.precision}" if row.precision else row.summary


def search_table(target: str, search: SearchReport) -> list[str]:
    """The candidate table of one search target: the Pareto view of latency vs agreement."""
    budget = f"max {search.max_candidates} candidates" + (
        f", {search.max_minutes:g} min" if search.max_minutes is not None else "")
    lines = [f"### Search {md_code(target)}: {md(search.message)}", "",
             f"{len(search.candidates)} candidates ({budget}); the search took "
             f"{search.seconds:.0f} s. ◆ = on the Pareto front of p50 latency vs top-1 "
             "agreement; *vs chosen* is measured interleaved in one process (95 % CI).", "",
             "| | candidate | adds | p50 ms | p90 ms | vs chosen | agreement % | cosine | MB "
             "| why not |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in search.candidates:
        front = " ◆" if row.pareto else ""
        lines.append(
            f"| {STATE_ICONS.get(row.state, md(row.state))}{front} | {md_code(row.name)} | "
            f"{md(adds(row))} | {_number(row.p50_ms)} | {_number(row.p90_ms)} | "
            f"{_ratio(row)} | {_number(row.top1_agreement, '.4g')} | "
            f"{_number(row.cosine, '.4f')} | {_number(row.size_mb)} | "
            f"{md(row.reason)} |")
    return lines


def junit(report: Report) -> str:
    """One testcase per gate; a failed stage is an error testcase of its own."""
    suite = ET.Element("testsuite", name=f"edgebuild.{report.recipe}",
                       time=f"{report.seconds:.3f}")
    failures = errors = skipped = tests = 0
    for target in report.targets:
        for gate in target.gates:
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=f"{report.recipe}.{target.name}",
                                 name=gate.gate)
            if gate.status is GateStatus.FAILED:
                failures += 1
                ET.SubElement(case, "failure", message=gate.message).text = gate.message
            elif gate.status is GateStatus.NOT_RUN:
                errors += 1
                ET.SubElement(case, "error", message=gate.message).text = gate.message
            elif gate.status in (GateStatus.UNDECIDED, GateStatus.UNMEASURABLE):
                if gate.counts_as_failure:  # the policy says fail
                    failures += 1
                    ET.SubElement(case, "failure", message=gate.message).text = gate.message
                else:
                    skipped += 1
                    ET.SubElement(case, "skipped", message=gate.message)
            ET.SubElement(case, "system-out").text = gate.message
    for target in report.targets:
        for row in target.search.candidates if target.search is not None else []:
            # Rejected candidates are expected: they never fail the suite, the `search`
            # gate above does when nothing passed.
            tests += 1
            case = ET.SubElement(suite, "testcase",
                                 classname=f"{report.recipe}.{target.name}.candidates",
                                 name=row.name)
            text = (f"{row.state}: {row.summary}; p50 {_number(row.p50_ms)} ms, agreement "
                    f"{_number(row.top1_agreement, '.4g')} %" +
                    (f"; {row.reason}" if row.reason else ""))
            if row.state not in ("chosen", "passed"):
                skipped += 1
                ET.SubElement(case, "skipped", message=f"not chosen: {row.reason}")
            ET.SubElement(case, "system-out").text = text
    for stage in report.stages:
        if stage.outcome == "failed" and stage.id not in _contained(report):
            tests += 1
            errors += 1
            case = ET.SubElement(suite, "testcase", classname=f"{report.recipe}.stages",
                                 name=stage.id)
            ET.SubElement(case, "error", message=stage.message).text = \
                f"{stage.message}\nlog: {stage.log}"
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
