"""The QNN partition table names nodes the model file named: a `|`, a newline, a link or
a tag in a node name or a custom op type stays text in its cell, in summary.md and in
report.html (issue 29: untrusted ONNX strings reaching a report)."""

from __future__ import annotations

from collections import Counter

from edgebuild.backends.qnn.partition import Partition, render_markdown
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.render import markdown
from tests.unit.test_report_markdown import rendered

NODE = "a|b\\|c\n## fake heading [x](https://evil.example) <img src=x onerror=alert(1)>"


def report() -> Report:
    found = Partition(htp=Counter({"Conv": 3}), cpu={"Evil|Op": [NODE]}, io=[], contexts=1)
    target = TargetReport(name="snapdragon", profile="snapdragon", backend="qnn",
                          notes={"qnn_partition.md": render_markdown(found, "SoC model 43")})
    return Report(recipe="demo", recipe_file="r.yaml", edgebuild_version="0", started="",
                  seconds=1.0, exit_code=0, stages=[], targets=[target], counts={})


def test_a_hostile_node_name_is_one_cell_of_text_in_summary_md() -> None:
    text = markdown(report())
    assert "\n## fake" not in text and "](https" not in text and "<img" not in text
    html = rendered(text)  # as GitHub parses it before its sanitizer
    row = html[html.index("<td>Evil|Op</td>"):]
    row = row[:row.index("</tr>")]
    assert row.count("<td>") == 4  # every `|` of the names stayed inside its cell
    assert "fake heading</h" not in html and "<a " not in html and "<img" not in html


def test_a_hostile_node_name_is_one_cell_of_text_in_report_html() -> None:
    html = html_page(report())
    row = html[html.index("<td>Evil|Op</td>"):]
    row = row[:row.index("</tr>")]
    assert row.count("<td>") == 4
    assert "a|b\\|c ## fake heading [x](https://evil.example) &lt;img" in row
    assert "<img src=x" not in html and 'href="https' not in html
