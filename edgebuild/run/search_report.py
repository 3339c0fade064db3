"""A search's candidate table, for report.json, summary.md and JUnit: the run's outcome
turned into the report's `SearchReport` (the report package knows no run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.measure.record import LatencyFigures, LatencyRecord, RecordError, read_record
from edgebuild.report.model import CandidateReport, SearchReport

if TYPE_CHECKING:
    from edgebuild.execute.result import ExecutionResult
    from edgebuild.recipe.loader import LoadedRecipe
    from edgebuild.run.search import SearchResult


def search_report(outcome: SearchResult, execution: ExecutionResult,
                  loaded: LoadedRecipe) -> SearchReport:
    from edgebuild.measuring.select import pareto_front

    entry = loaded.recipe.targets[outcome.target]
    assert entry.search is not None
    written = {c.name: c for c in loaded.searches[outcome.target]}
    compared = {c.name: c for c in (outcome.ranking.candidates if outcome.ranking else [])}
    rows = []
    for name, result in outcome.candidates.items():
        candidate = written[name]
        row = CandidateReport(
            name=name, state=result.state.value, reason=result.reason,
            summary=candidate.describe(), config=candidate.config(), grid=candidate.point,
            stage=result.stages.compiled, stages=result.own, chosen=name == outcome.chosen,
            gates=result.gates)
        latency = execution.runs.get(result.stages.latency or "")
        if latency is not None and latency.artifact is not None:
            try:
                stats = _first_timed(read_record(LatencyRecord, latency.artifact.metadata,
                                                 latency.stage.id))
            except RecordError:  # its latency gate says so; the table shows no figure
                stats = None
            if stats is not None:  # a device tool may give neither
                row.p50_ms, row.p90_ms = stats.p50, stats.p90
        compiled = execution.runs.get(result.stages.compiled)
        if compiled is not None and compiled.artifact is not None:
            row.size_mb = round(compiled.artifact.shipped_bytes / 1e6, 3)
            row.precision = compiled.artifact.precision_label
        for gate in result.gates:
            if gate.gate.startswith("accuracy"):
                row.top1_agreement = gate.measured.get("top1_agreement")
                row.cosine = gate.measured.get("cosine")
                row.top1 = gate.measured.get("top1")
        if name in compared:
            row.interleaved_ms = compared[name].median_ms
            row.ratio = compared[name].ratio
            row.ratio_ci95 = list(compared[name].ci95)
        rows.append(row)
    front = pareto_front({r.name: (r.p50_ms, r.top1_agreement) for r in rows
                          if r.p50_ms is not None and r.top1_agreement is not None})
    for row in rows:
        row.pareto = row.name in front
    selection = None
    if outcome.ranking is not None:
        selection = {k: v for k, v in outcome.ranking.to_json().items() if k != "candidates"}
    return SearchReport(chosen=outcome.chosen, message=outcome.message,
                        max_candidates=entry.search.max_candidates,
                        max_minutes=entry.search.max_minutes, seconds=outcome.seconds,
                        candidates=rows, selection=selection)


def _first_timed(record: LatencyRecord) -> LatencyFigures | None:
    """The figures the candidate table shows: with shape profiles, the first one timed."""
    if record.profiles is None:
        return record
    return next((row for row in record.profiles.values() if row.p50 is not None), None)
