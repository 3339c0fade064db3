"""Device logs are untrusted (issue 39): benchmark_model's tables, trtexec's layer JSON
and QNN's profile CSV are refused with one line naming the row when they hold what the
tool never writes (a number that is not finite, a string or boolean for a number, JSON
or a layer name nested thousands deep), and report.json stays JSON whatever a record
holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edgebuild.backends.qnn.profile import QnnProfileError, read_csv
from edgebuild.backends.tensorrt.layer_profile import LayerProfileError, read
from edgebuild.backends.tensorrt.layer_profile import op_profile as trt_profile
from edgebuild.backends.tensorrt.trtexec import read_layers
from edgebuild.backends.tflite.op_profiling import SECTION, ProfileLogError
from edgebuild.backends.tflite.op_profiling import op_profile as tflite_profile
from edgebuild.measure.record import OpProfile, OpRow
from edgebuild.report.model import Report, TargetReport
from edgebuild.run.driver import write_reports

DATA = Path(__file__).parent.parent / "data" / "profiles"
RISCV = DATA / "benchmark_model_qemu_riscv64_mobilenet_v1.txt"
TRT = DATA / "trtexec_mobilenet_v2_residuals_qat.profile.json"
CSV = Path(__file__).parent / "fixtures" / "qnn_profile_detailed.csv"


def _strict(text: str) -> Any:
    def refuse(token: str) -> None:
        raise AssertionError(f"{token} in report.json")

    return json.loads(text, parse_constant=refuse)


def test_benchmark_models_avg_ms_of_1e999_is_refused_naming_the_row() -> None:
    lines = RISCV.read_text().splitlines()
    section = next(i for i, line in enumerate(lines) if SECTION in line)
    header = next(i for i in range(section, len(lines)) if "[avg ms]" in lines[i])
    cells = lines[header + 1].split("\t")
    column = next(i for i, c in enumerate(lines[header].split("\t")) if "[avg ms]" in c)
    cells[column] = "1e999"
    lines[header + 1] = "\t".join(cells)
    with pytest.raises(ProfileLogError, match=rf"line {header + 2} of the 'Run Order' "
                                              r"table, \[avg ms\]: '1e999' is not a finite"):
        tflite_profile("\n".join(lines))


@pytest.fixture
def layers() -> list[Any]:
    data: list[Any] = json.loads(TRT.read_text())
    return data


@pytest.mark.parametrize("value", ["5", True, 1e999])
def test_trtexec_numbers_are_json_numbers_and_finite(layers: list[Any], value: Any) -> None:
    text = json.dumps([layers[0], {**layers[1], "timeMs": value}])
    with pytest.raises(LayerProfileError, match=r"entry 1 .*timeMs"):
        read(text)


def test_trtexec_json_nested_deep_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LayerProfileError, match="nested more than 200 levels deep"):
        read("[" * 100_000 + "]" * 100_000)
    (tmp_path / "layers.json").write_text("[" * 100_000)
    assert "layers.json could not be read (not JSON edgebuild reads: nested more than " \
        "200 levels" in (read_layers(tmp_path / "layers.json", tmp_path).unmeasurable or "")


def test_a_layer_name_nesting_pwn_3000_deep_is_refused(layers: list[Any]) -> None:
    name = "PWN(" * 3000 + "Conv_9" + ")" * 3000
    text = json.dumps([layers[0], {**layers[1], "name": name}])
    with pytest.raises(LayerProfileError, match="entry 1: its name nests parentheses"):
        trt_profile(text)


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "1e999"])
def test_a_qnn_cycle_count_that_is_not_a_count_is_refused(value: str) -> None:
    lines = CSV.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if ",NODE," in line and "CYCLES" in line)
    parts = lines[row].split(",", 6)
    parts[2] = value
    lines[row] = ",".join(parts)
    with pytest.raises(QnnProfileError, match=rf"qnn_profile.csv, row {row + 1}: "):
        read_csv("\n".join(lines))


def test_report_json_stays_json_whatever_a_record_holds(tmp_path: Path) -> None:
    profile = OpProfile(source="test", runtime_ms=float("inf"), ops_ms=float("nan"),
                        rows=[OpRow(node="a", op_type="Conv", ms=float("inf"), share=0.5)])
    target = TargetReport(name="t", profile="host-cpu", backend="tflite",
                          op_profile=profile)
    report = Report(recipe="r", recipe_file="r.yaml", edgebuild_version="0", started="",
                    seconds=1, exit_code=0, stages=[], targets=[target], counts={})
    write_reports(report, tmp_path)
    written = _strict((tmp_path / "report.json").read_text())
    assert written["targets"][0]["op_profile"]["runtime_ms"] is None
    assert written["targets"][0]["op_profile"]["rows"][0]["ms"] is None
