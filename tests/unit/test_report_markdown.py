"""summary.md (a CI step summary): whatever a recipe or a data file wrote reads as text,
never as HTML, a link, an image or another table cell (issue 28, item 9)."""

from __future__ import annotations

import re

import pytest

from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.report.markdown import md, md_code
from edgebuild.report.model import (
    CandidateReport,
    Report,
    SearchReport,
    StageReport,
    TargetReport,
)
from edgebuild.report.render import markdown

DATASET = "<script>alert(1)</script>|[x](javascript:alert(2))"
LABEL_LINE = "0 0.5 0.5 <img src=x onerror=alert(3)> 0.2"
MULTILINE = "line one\n## edgebuild: `demo` — all gates passed\n| fake | row |"


def hostile_report() -> Report:
    gate = GateResult(target="host-cpu", gate=f"accuracy[{DATASET}]", status=GateStatus.FAILED,
                      counts_as_failure=True,
                      message=f"cannot compare on '{DATASET}': `code` {MULTILINE}")
    search = SearchReport(
        chosen=None, message=f"no candidate passed on {DATASET}", max_candidates=4,
        max_minutes=None, seconds=1.0, candidates=[CandidateReport(
            name="fp32", state="rejected", summary=f"quantize: {{calibration: {DATASET}}}",
            precision=f"bf16 {DATASET}",
            reason=f"accuracy[{DATASET}] failed")])
    failed = StageReport(
        id=f"reference[{DATASET}]", op="reference", target=None, outcome="failed",
        cached=False, seconds=0.1, inputs=[],
        message=f"dataset '{DATASET}': labels/a.txt:1: {LABEL_LINE!r} is not a box",
        log=f"/out/logs/reference[{DATASET}].log")
    notes = {"n.md": f"### Coverage of {DATASET}\n\n| op | n |\n|---|---|\n| Conv | 1 |\n"
             f"</details><img src=y onerror=alert(4)>\n"}
    target = TargetReport(name="host-cpu", profile="host-cpu", backend="onnxruntime",
                          gates=[gate], search=search, notes=notes,
                          precision=f"f16 requested; {LABEL_LINE} {MULTILINE}")
    return Report(recipe="demo", recipe_file="r.yaml", edgebuild_version="0", started="",
                  seconds=1.0, exit_code=2, stages=[failed], targets=[target], counts={})


def rendered(text: str) -> str:
    """The HTML a CommonMark + tables renderer with raw HTML on makes of it (GitHub's
    Markdown parses the same way before its sanitizer)."""
    markdown_it = pytest.importorskip("markdown_it", reason="renders the Markdown to check")
    html: str = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    return html


def test_hostile_names_and_label_lines_are_text_in_summary_md() -> None:
    text = markdown(hostile_report())
    assert "<script" not in text and "<img" not in text and "](javascript" not in text
    html = rendered(text)
    assert "<script" not in html and "<img" not in html
    assert "<a " not in html  # no link at all, javascript: or other
    # The texts are there, as text: what a reader sees is what the file held.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|[x](javascript:alert(2))" in html
    assert "&lt;img src=x onerror=alert(3)&gt;" in html


def test_a_hostile_cell_stays_in_its_cell_and_its_line() -> None:
    text = markdown(hostile_report())
    html = rendered(text)
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)
    gate_row = next(r for r in rows if "FAIL" in r)
    assert gate_row.count("<td>") == 5  # `|` in the dataset name split no cell
    assert "<h2>" in html and html.count("<h2>") == 1  # no injected headline
    assert "<td>fake</td>" not in html
    assert "line one ## edgebuild" in text  # the newline became a space


def test_precision_labels_are_one_escaped_line_and_a_search_cell() -> None:
    text = markdown(hostile_report())
    (line,) = [x for x in text.splitlines() if x.startswith("Precision (as run")]
    assert line.startswith("Precision (as run on the build host): `host-cpu` f16 requested; ")
    assert "&lt;img src=x onerror=alert(3)&gt;" in line and "line one ## edgebuild" in line
    row = next(x for x in text.splitlines() if x.startswith("| ❌ rejected"))
    assert "; runs bf16 &lt;script&gt;" in row
    plain = hostile_report().model_copy(update={"targets": []})
    assert "Precision" not in markdown(plain)  # no backend labelled one: no line


def test_md_escapes_each_kind_of_markup() -> None:
    assert md("a|b") == "a&#124;b"
    assert md("<b>&") == "&lt;b&gt;&amp;"
    assert md("[x](javascript:y)") == "[x&#93;(javascript:y)"
    assert md("![i](http://h/p.png)") == "![i&#93;(http://h/p.png)"
    assert md("`code`") == "&#96;code&#96;"
    assert md("a\\|b") == "a&#92;&#124;b"
    assert md("one\ntwo\r\nthree\u2028four") == "one two three four"
    assert md("latency[small], top1 99.5 % (policy: warn)") == \
        "latency[small], top1 99.5 % (policy: warn)"  # ordinary text stays as written
    assert md_code("compile@host-cpu[int8]") == "`compile@host-cpu[int8]`"
    assert md_code("a`b|c") == "<code>a&#96;b&#124;c</code>"


def test_backend_notes_keep_their_tables_but_not_raw_html() -> None:
    html = rendered(markdown(hostile_report()))
    assert "<td>Conv</td>" in html  # the note's own table still renders
    assert "&lt;/details&gt;&lt;img" in html and html.count("</details>") == 1
