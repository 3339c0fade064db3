"""A busy machine: the bounded wait for quiet, and how a run that could not time
something says so (one line; never "a gate failed")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgebuild.gates.result import GateResult, GateStatus
from edgebuild.measure import quiet
from edgebuild.measure.quiet import WaitBudget, wait_for_quiet
from edgebuild.report.html import html_page
from edgebuild.report.model import Report, TargetReport
from edgebuild.report.render import could_not_time, markdown


def test_waits_until_quiet_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    shares = iter([0.9, 0.8, 0.1])
    budget = WaitBudget(None, 60.0)
    assert wait_for_quiet(0.25, budget, "measure-latency@host-cpu",
                          look=lambda: next(shares)) == 0.1
    err = capsys.readouterr().err
    assert "waiting for the machine to quieten (load " in err
    assert "other processes use 90% of the CPU) before timing measure-latency@host-cpu" in err
    assert "quiet after" in err
    assert budget.waited() > 0


def test_a_quiet_machine_is_timed_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    looks = []
    wait_for_quiet(0.25, WaitBudget(None, 60.0), "x", look=lambda: looks.append(1) or 0.01)
    assert len(looks) == 1 and capsys.readouterr().err == ""


def test_the_budget_is_shared_by_the_run_and_bounds_the_wait(tmp_path: Path) -> None:
    ledger = tmp_path / "quiet.json"
    WaitBudget.create(ledger)
    first = WaitBudget(ledger, 0.05)
    looks: list[int] = []
    share = wait_for_quiet(0.25, first, "a", look=lambda: looks.append(1) or 0.99)
    assert share == 0.99 and len(looks) >= 1  # gave up: still busy
    assert json.loads(ledger.read_text())["waited_s"] > 0
    # a later stage of the same run finds the budget spent: one look, no waiting
    second = WaitBudget(ledger, 0.05)
    assert second.remaining() == 0
    looks.clear()
    wait_for_quiet(0.25, second, "b", look=lambda: looks.append(1) or 0.99)
    assert len(looks) == 1


def test_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(quiet.WAIT_ENV, raising=False)
    monkeypatch.delenv(quiet.LEDGER_ENV, raising=False)
    assert WaitBudget.from_env().budget_s == quiet.STAGE_BUDGET_S
    monkeypatch.setenv(quiet.LEDGER_ENV, str(tmp_path / "l.json"))
    assert WaitBudget.from_env().budget_s == quiet.RUN_BUDGET_S
    monkeypatch.setenv(quiet.WAIT_ENV, "0")
    assert WaitBudget.from_env().remaining() == 0


def _gate(target: str, status: GateStatus, fails: bool, busy: bool = False) -> GateResult:
    return GateResult(target=target, gate="latency", status=status, counts_as_failure=fails,
                      details={"busy": True} if busy else {}, message="…")


def _report(gates: list[GateResult], exit_code: int) -> Report:
    return Report(recipe="quickstart", recipe_file="r.yaml", edgebuild_version="0",
                  started="2026-01-01T00:00:00", seconds=1.0, exit_code=exit_code,
                  stages=[], targets=[TargetReport(name=g.target, profile="p", backend="b",
                                                   gates=[g]) for g in gates],
                  counts={})


def test_a_busy_run_says_what_it_could_not_time_not_that_a_gate_failed() -> None:
    report = _report([_gate("host-cpu", GateStatus.UNMEASURABLE, False, busy=True),
                      _gate("android-int8", GateStatus.UNMEASURABLE, False, busy=True),
                      _gate("intel-cpu", GateStatus.PASSED, False),
                      _gate("iphone", GateStatus.UNMEASURABLE, False)], 0)
    line = "could not time: host-cpu.latency, android-int8.latency (machine busy)"
    assert could_not_time(report) == line
    headline = markdown(report).splitlines()[0]
    assert line in headline and "no gate failed" in headline
    assert "a gate failed" not in headline
    assert "1 undecided or not measurable" in headline  # the iPhone: no device here
    page = html_page(report)
    assert line in page and "a gate failed" not in page


def test_a_real_failure_is_still_a_gate_failure_beside_a_busy_one() -> None:
    report = _report([_gate("host-cpu", GateStatus.UNMEASURABLE, False, busy=True),
                      _gate("intel-cpu", GateStatus.FAILED, True)], 1)
    assert markdown(report).splitlines()[0] == (
        "## edgebuild: `quickstart` — a gate failed; could not time: host-cpu.latency "
        "(machine busy)")


def test_busy_only_with_policy_fail_is_not_called_a_gate_failure() -> None:
    report = _report([_gate("host-cpu", GateStatus.UNMEASURABLE, True, busy=True)], 1)
    headline = markdown(report).splitlines()[0]
    assert "could not time: host-cpu.latency (machine busy)" in headline
    assert "a gate failed" not in headline and "policy.unmeasurable" in headline


def test_a_quiet_run_has_no_such_line() -> None:
    report = _report([_gate("host-cpu", GateStatus.PASSED, False)], 0)
    assert could_not_time(report) == ""
    assert markdown(report).splitlines()[0].endswith("all gates passed")
