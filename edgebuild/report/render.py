"""Render a Report as Markdown (for PR comments / CI step summaries) and JUnit XML."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from edgebuild.gates.result import GateStatus
from edgebuild.report.model import Report

ICONS = {GateStatus.PASSED: "✅ pass", GateStatus.FAILED: "❌ FAIL",
         GateStatus.UNMEASURABLE: "⚠️ not measurable", GateStatus.NOT_RUN: "❌ not run",
         GateStatus.UNDECIDED: "⚠️ undecided"}


def _verdict(report: Report) -> str:
    return {0: "all gates passed", 1: "a gate failed", 3: "a stage failed"}.get(
        report.exit_code, f"exit {report.exit_code}")


def markdown(report: Report) -> str:
    built = report.counts.get("built", 0)
    cached = report.counts.get("cached", 0)
    lines = [
        f"## edgebuild: `{report.recipe}` — {_verdict(report)}",
        "",
        f"{built} stage(s) built, {cached} cached, in {report.seconds:.1f} s.",
        "",
        "| target | gate | result | measured | limit |",
        "|---|---|---|---|---|",
    ]
    for target in report.targets:
        if not target.gates:
            lines.append(f"| {target.name} | — | no gates | | |")
        for gate in target.gates:
            measured = ", ".join(f"{k} {v:.4g}" for k, v in gate.measured.items()
                                 if k not in ("samples", "n", "reference_top1", "std"))
            limits = ", ".join(f"{k} {v:g}" for k, v in gate.limits.items())
            lines.append(f"| {target.name} | {gate.gate} | {ICONS[gate.status]} | "
                         f"{measured or gate.message} | {limits} |")
    failed = [s for s in report.stages if s.outcome == "failed"]
    if failed:
        lines += ["", "### Failed stages", ""]
        lines += [f"- `{s.id}`: {s.message} (log: `{s.log}`)" for s in failed]
    notes = [g for g in report.gates if g.status is not GateStatus.PASSED]
    if notes:
        lines += ["", "### Details", ""]
        lines += [f"- **{g.name}**: {g.message}" for g in notes]
    return "\n".join(lines) + "\n"


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
            elif gate.status is GateStatus.UNDECIDED:
                skipped += 1
                ET.SubElement(case, "skipped", message=gate.message)
            elif gate.status is GateStatus.UNMEASURABLE:
                if gate.counts_as_failure:
                    failures += 1
                    ET.SubElement(case, "failure", message=gate.message).text = gate.message
                else:
                    skipped += 1
                    ET.SubElement(case, "skipped", message=gate.message)
            ET.SubElement(case, "system-out").text = gate.message
    for stage in report.stages:
        if stage.outcome == "failed":
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
