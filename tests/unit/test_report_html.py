"""report.html: self-contained, escaped, every target and gate shown, plots drawn."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.report import svg
from edgebuild.report.html import html_page, markdown_to_html
from edgebuild.report.model import (
    CandidateReport,
    Report,
    SearchReport,
    StageReport,
    TargetReport,
)
from edgebuild.run.driver import write_reports

EVIL = "<script>alert(1)</script>"


def _samples(center: float, n: int = 400) -> list[float]:
    """Deterministic latency-like samples: a tight body and a slow tail."""
    return [round(center * (1 + 0.05 * math.sin(i) + (0.6 if i % 97 == 0 else 0)), 4)
            for i in range(n)]


def _gates(target: str, p50: float, budget: float, agreement: float, mb: float,
           passed: bool = True) -> list[GateResult]:
    samples = _samples(p50)
    return [
        GateResult(target=target, gate="accuracy", status=GateStatus.PASSED,
                   counts_as_failure=False,
                   measured={"top1": agreement - 8, "top1_agreement": agreement,
                             "cosine": 0.999, "samples": 1000.0},
                   limits={"min_top1": 85.0}, details={"dataset": "test"},
                   message=f"on 1000 samples of 'test': top1_agreement {agreement}"),
        GateResult(target=target, gate="latency",
                   status=GateStatus.PASSED if passed else GateStatus.FAILED,
                   counts_as_failure=not passed,
                   measured={"p50": p50, "p90": p50 * 1.08, "p99": p50 * 1.5, "n": 4000.0},
                   limits={"budget_ms": budget, "percentile": 90.0},
                   details={"ci95": [p50, p50 * 1.1], "samples_ms": samples},
                   message=f"p90 {p50 * 1.08:.3f} ms over 4000 runs, budget {budget} ms"),
        GateResult(target=target, gate="size", status=GateStatus.PASSED,
                   counts_as_failure=False, measured={"mb": mb}, limits={"max_mb": 1.0},
                   message=f"artifact is {mb} MB"),
    ]


def _stage(stage_id: str, inputs: list[str], outcome: str = "built",
           message: str = "") -> StageReport:
    op, _, target = stage_id.partition("@")
    return StageReport(id=stage_id, op=op, target=target or None, outcome=outcome,
                       cached=outcome == "cached", seconds=0.5, inputs=inputs,
                       message=message, log=f"/out/logs/{stage_id}.log")


@pytest.fixture()
def report() -> Report:
    candidates = [
        CandidateReport(name="fp32", state="passed", p50_ms=0.30, top1_agreement=100.0,
                        size_mb=0.57, reason="slower than int8"),
        CandidateReport(name="int8", state="chosen", chosen=True, p50_ms=0.10,
                        top1_agreement=99.5, size_mb=0.15, pareto=True,
                        summary="quantize", precision="int8 (layers: f32 2, u8 9)"),
        CandidateReport(name="int8-bad", state="rejected", p50_ms=0.12, top1_agreement=90.0,
                        size_mb=0.15, reason="top1 90 < 91"),
    ]
    search = SearchReport(chosen="int8", message="int8 chosen of 3", max_candidates=4,
                          max_minutes=None, seconds=12.0, candidates=candidates)
    notes = {"qnn_partition.md": "### QNN HTP partition (sm8650)\n\n12 nodes on the HTP.\n\n"
             "| op type | on HTP | on CPU |\n|---|---|---|\n| Conv | 4 | 0 |\n"
             f"| {EVIL} | 1 | 1 |\n"}
    regression = GateResult(
        target="host-cpu", gate="regression", status=GateStatus.PASSED,
        counts_as_failure=False,
        measured={"ratio": 1.02, "baseline_p50": 0.15, "candidate_p50": 0.153},
        limits={"max_regression_pct": 10.0},
        details={"ratio": 1.02, "ci95": [0.99, 1.05], "threshold": 0.1, "blocks": 20,
                 "decision": "ok"},
        message="no regression: +2.0 % [95 % CI -1.0 to +5.0 %] over 20 blocks")
    targets = [
        TargetReport(name="host-cpu", profile="host-cpu", backend="onnxruntime",
                     artifact="artifacts/host-cpu/model.onnx", format="onnx",
                     size_bytes=568_000,
                     gates=[*_gates("host-cpu", 0.15, 2.0, 100.0, 0.568), regression]),
        TargetReport(name="host-cpu-int8", profile="host-cpu", backend="onnxruntime",
                     format="onnx", size_bytes=150_000,
                     gates=_gates("host-cpu-int8", 0.08, 0.05, 99.6, 0.15, passed=False),
                     search=search, notes=notes),
        TargetReport(name=f"evil{EVIL}", profile="host-cpu", backend="onnxruntime",
                     size_bytes=180_000, precision=f"bf16 {EVIL}", gates=[GateResult(
                         target=f"evil{EVIL}", gate="size", status=GateStatus.NOT_RUN,
                         counts_as_failure=True, message=f"nothing measured: {EVIL}")]),
    ]
    stages = [_stage("export-onnx", []), _stage("onnx-optimize", ["export-onnx"], "cached"),
              _stage("compile@host-cpu", ["onnx-optimize"]),
              _stage("measure-latency@host-cpu", ["compile@host-cpu"], "unmeasurable"),
              _stage("quantize", ["onnx-optimize"]),
              _stage("compile@host-cpu-int8", ["quantize"]),
              _stage(f"compile@evil{EVIL}", ["onnx-optimize"], "failed", f"boom {EVIL}")]
    return Report(recipe="demo", recipe_file="/r/demo.yaml", edgebuild_version="0.1.0",
                  started="2026-01-01T00:00:00+00:00", seconds=3.2, exit_code=3,
                  stages=stages, targets=targets,
                  counts={"built": 5, "cached": 1, "failed": 1, "unmeasurable": 1},
                  machine={"platform": "Linux", "cores": 2})


class Collect(HTMLParser):
    """Tags, attributes and text of a page; raises nothing on valid HTML."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> Collect:
    parser = Collect()
    parser.feed(page)
    parser.close()
    return parser


EXTERNAL = re.compile(r"""(?:src|href|xlink:href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:|//)""",
                      re.IGNORECASE)


def external_references(page: str) -> list[str]:
    """Every way a page could load something remote (or run a script)."""
    found = EXTERNAL.findall(page)
    found += re.findall(r"url\(\s*['\"]?\s*(?:[a-z]+:|//)", page, re.IGNORECASE)
    found += re.findall(r"@import", page)
    found += [t for t, _ in _parse(page).tags if t in ("script", "iframe", "link", "object",
                                                       "embed")]
    return found


def test_page_parses_and_is_self_contained(report: Report) -> None:
    page = html_page(report)
    parsed = _parse(page)
    tags = [t for t, _ in parsed.tags]
    assert tags[0] == "html" and "style" in tags
    assert "http://" not in page and "https://" not in page
    assert external_references(page) == []
    # Plots: the trade-off scatter, two latency plots, the search scatter, the baseline
    # ratios and the build graph.
    assert tags.count("svg") == 6


def test_the_check_catches_remote_references() -> None:
    for bad in ('<img src="https://example.com/x.png">', "<img src='//cdn.example/x'>",
                '<a href="http://x">x</a>', '<script src="a.js"></script>',
                '<style>body{background:url("https://x/y.png")}</style>',
                '<link rel="stylesheet" href="x.css">', '<svg><image href="ftp://x"/></svg>'):
        assert external_references(f"<html><body>{bad}</body></html>"), bad


def test_every_target_and_gate_appears_escaped(report: Report) -> None:
    page = html_page(report)
    text = "".join(_parse(page).text)
    for target in report.targets:
        assert target.name in text
        for gate in target.gates:
            assert gate.message in text
            assert f'<tr class="{gate.status.value}"><td>{gate.gate}</td>' in page
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "FAIL" in text and "not run" in text
    assert "boom " + EVIL in text  # the failed stage and its message
    assert "Against the baseline" in text and "×1.020" in text
    assert "int8 chosen of 3" in text and "top1 90 &lt; 91" in page
    # The precision each target and candidate runs in (a cached entry wrote it: escaped).
    assert "<th>precision</th>" in page and f"bf16 {EVIL}" in text
    assert "quantize; runs int8 (layers: f32 2, u8 9)" in text


def test_notes_tables_become_html_tables() -> None:
    out = markdown_to_html("### Title\n\nSome `code` and **bold**.\nmore\n\n"
                           "| a | b |\n|---|:-:|\n| 1 | x <y> |\n\n- one\n- two\n\n"
                           "```\nraw | text\n```\n| not a table")
    assert "<h5>Title</h5>" in out
    assert "<p>Some <code>code</code> and <b>bold</b>. more</p>" in out
    assert "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>x &lt;y&gt;</td></tr>" \
        "</table>" in out
    assert "<ul><li>one</li><li>two</li></ul>" in out
    assert "<pre>raw | text</pre>" in out
    assert "<p>| not a table</p>" in out


def test_pareto_front() -> None:
    points = {"fast": (1.0, 90.0), "slow-best": (3.0, 99.0), "middle": (2.0, 95.0),
              "dominated": (2.5, 94.0), "tie-worse": (2.0, 94.0), "same-as-fast": (1.0, 90.0)}
    assert svg.pareto(points) == {"fast", "same-as-fast", "middle", "slow-best"}
    assert svg.pareto({"only": (1.0, 1.0)}) == {"only"}
    assert svg.pareto({}) == set()


def test_scatter_marks_the_front() -> None:
    plot = svg.scatter([svg.Point("a", 1.0, 90.0, 0.5), svg.Point("b", 2.0, 95.0, 1.0),
                        svg.Point("c", 2.5, 94.0, 0.2)], "p50", "agreement")
    front = re.findall(r'class="point front" data-name="(\w)"', plot)
    assert sorted(front) == ["a", "b"]
    assert 'class="point" data-name="c"' in plot
    assert "<polyline" in plot


def test_latency_plot_draws_budget_and_percentile() -> None:
    plot = svg.latency_plot(_samples(1.0), 1.2, ("p90", 1.05))
    assert 'class="budget"' in plot and 'class="gated"' in plot and "budget 1.2 ms" in plot
    far = svg.latency_plot(_samples(0.1), 50.0, ("p90", 0.11))
    assert "off the scale" in far and 'class="budget"' not in far


def test_dag_layers_by_depth(report: Report) -> None:
    nodes = [svg.Node(s.id, s.inputs, s.outcome) for s in report.stages]
    picture = svg.dag(nodes)
    assert picture.count('<g class="stage') == len(nodes)
    assert picture.count('class="edge"') == sum(len(s.inputs) for s in report.stages)
    assert '<g class="stage failed">' in picture
    x = {m[0]: float(m[1]) for m in re.findall(
        r"<title>([^<\n]+?) — \w+</title><rect x=\"([\d.]+)\"", picture)}
    assert x["export-onnx"] < x["onnx-optimize"] < x["quantize"] < x["compile@host-cpu-int8"]


def test_write_reports_writes_the_page(report: Report, tmp_path: Path) -> None:
    write_reports(report, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert page == html_page(report)
    assert not list(tmp_path.glob(".*.tmp"))


def test_sparse_reports_render() -> None:
    """An empty run, and one whose latency came from a device tool (no samples, no p90)."""
    empty = Report(recipe="empty", recipe_file="e.yaml", edgebuild_version="0", started="",
                   seconds=0.0, exit_code=0, stages=[], targets=[], counts={})
    assert "all gates passed" in html_page(empty)
    device = GateResult(target="phone", gate="latency", status=GateStatus.UNMEASURABLE,
                        counts_as_failure=False, measured={"mean": 3.0, "n": 50.0},
                        limits={"budget_ms": 5.0, "percentile": 90.0},
                        message="not measurable here: the device tool reports mean, n")
    one = Report(recipe="one", recipe_file="o.yaml", edgebuild_version="0", started="",
                 seconds=1.0, exit_code=0, counts={"built": 1},
                 stages=[_stage("compile@phone", [])],
                 targets=[TargetReport(name="phone", profile="android", backend="tflite",
                                       gates=[device], notes={"n.md": "just text, no heading"})])
    page = html_page(one)
    _parse(page)
    assert "No latency samples" in page and "just text, no heading" in page
    assert "no edges are drawn" in page


def test_a_served_models_breakdown_is_a_table_with_names_escaped() -> None:
    """The Triton backend's sweep and per-model server times (measure/record.Serving)."""
    from edgebuild.measure.record import Serving

    serving = Serving.model_validate({
        "model": "ensemble", "server": "Triton 2.51.0", "command": f"perf_analyzer {EVIL}",
        "levels": [{"concurrency": 1, "fps": 426.0, "requests": 3068, "p50": 1.44,
                    "p90": 5.0, "p99": 8.2, "steps": [
                        {"model": f"pre{EVIL}", "requests": 3069, "queue_us": 74.7,
                         "compute_input_us": 14.1, "compute_infer_us": 244.3,
                         "compute_output_us": 439.7}]}]})
    one = Report(recipe="one", recipe_file="o.yaml", edgebuild_version="0", started="",
                 seconds=1.0, exit_code=0, counts={"built": 1},
                 stages=[_stage("compile@triton", [])],
                 targets=[TargetReport(name="triton", profile="triton-cpu", backend="triton",
                                       gates=[], serving=serving)])
    page = html_page(one)
    _parse(page)
    assert "Serving: where the time goes" in page and EVIL not in page
    assert "244.3" in page and "439.7" in page and "426.0" in page and "8.200" in page
