"""select: time a search's passing candidates against each other and keep the fastest.

Each candidate's own `measure-latency` stage ran at a different moment, and on
a shared machine moments differ by ±20 %, so the minimum of those medians is
partly a draw. This stage loads every candidate that passed its gates into one
process and times them round-robin in blocks, rotating who goes first each round
(the latency protocol, edgebuild/measure/timing.py).

The candidate with the lowest median over all its runs wins; every other one
is reported as a ratio to the winner with a 95 % interval from a bootstrap over
paired rounds (`decide` in gates/regression.py), so a reader sees whether the win is
real or within noise. The stage's key covers exactly the passing candidates'
artifacts and settings: a re-run with the same gate outcomes reuses it.

With shape profiles every profile is timed the same way, one after the other. The
winner has the lowest geometric mean of its per-profile medians (each profile
weighs the same, however long it runs), and the ratios pool the paired rounds of
every profile, as many from each.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.op import OpResult, StageContext
from edgebuild.core.shapes import EXAMPLE, io_profiles
from edgebuild.measure.conditions import conditions
from edgebuild.measure.record import SelectionRecord
from edgebuild.measure.record import Standing as StandingRecord
from edgebuild.measure.timing import time_blocks
from edgebuild.measuring.latency import InterleavedTiming
from edgebuild.recipe.common import MeasureSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from edgebuild.backends.base import Backend


class SelectCandidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    options: dict[str, Any] = Field(default_factory=dict)  # its backend options
    measure: dict[str, Any] = Field(default_factory=dict)  # its MeasureSettings


class SelectParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    candidates: list[SelectCandidate] = Field(
        min_length=1, description="The candidates compared (input roles are their names).")


class Select(InterleavedTiming):
    name = "select"
    version = 2  # 2: every shape profile is timed
    Params = SelectParams
    produces = "selection"
    summary = "time a search's passing candidates interleaved and pick the fastest"

    def _run(self, ctx: StageContext, backend: Backend, params: Any) -> OpResult:
        import numpy as np

        from edgebuild.core.generated import sample_inputs

        assert ctx.target is not None
        p: SelectParams = params
        settings = ctx.target.measure
        before = conditions(settings.threads)
        timed: dict[str, np.ndarray] = {}
        with ExitStack() as stack:
            runners = []
            for candidate in p.candidates:
                info = ctx.target.variant(
                    f"{ctx.target.name}[{candidate.name}]", candidate.options,
                    MeasureSettings.model_validate(candidate.measure))
                runners.append(stack.enter_context(backend.runner(
                    ctx.input(candidate.name), info, candidate.measure.get("threads"))))
            for profile, shapes in io_profiles(ctx.io).items():
                (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1, shapes=shapes)
                # A candidate that folded a declared constant (`fold-inputs`) is not fed it.
                constants = {t["name"] for t in ctx.io.inputs if t.get("value") is not None}
                for runner in runners:  # each passed its latency gate at every profile
                    runner.reshape(shapes)
                timed[profile] = time_blocks([_bind(r, r.fed(feeds, constants))
                                              for r in runners], settings)
                suffix = f"-{profile}" if ctx.io.shapes else ""
                np.save(ctx.out / f"blocks_ms{suffix}.npy", timed[profile])
        ranking = rank(timed if ctx.io.shapes else timed[EXAMPLE],
                       [c.name for c in p.candidates])
        return self.finish(ctx, "selection.json", ranking.record(), before)


def _bind(runner: Any, feeds: dict[str, Any]) -> Callable[[], Any]:
    return lambda: runner.infer(feeds)


@dataclass(frozen=True)
class Standing:
    """One compared candidate: its interleaved median and how it relates to the winner."""

    name: str
    median_ms: float  # with shape profiles: at the first profile, as the candidate table
    p90_ms: float
    ratio: float  # its median / the winner's, per paired round; 1.0 for the winner
    low: float
    high: float
    slower: bool  # the interval lies above 1: a real difference, not noise
    profiles: dict[str, dict[str, float]] = field(default_factory=dict)  # median/p90 each

    def record(self) -> StandingRecord:
        record = StandingRecord(name=self.name, median_ms=round(self.median_ms, 4),
                                p90_ms=round(self.p90_ms, 4), ratio=round(self.ratio, 4),
                                ci95=(round(self.low, 4), round(self.high, 4)),
                                slower=self.slower)
        if self.profiles:
            record.profiles = {name: {k: round(v, 4) for k, v in row.items()}
                               for name, row in self.profiles.items()}
        return record


@dataclass(frozen=True)
class Ranking:
    chosen: str
    standings: list[Standing]  # fastest first
    rounds: int

    @property
    def tied(self) -> list[str]:
        """Candidates the measurement cannot tell apart from the winner."""
        return [s.name for s in self.standings if s.name != self.chosen and not s.slower]

    def record(self) -> SelectionRecord:
        return SelectionRecord(chosen=self.chosen, rounds=self.rounds, tied=self.tied,
                               candidates=[s.record() for s in self.standings])


def rank(blocks: np.ndarray | dict[str, np.ndarray], names: list[str]) -> Ranking:
    """The winner and everyone's ratio to it, from blocks shaped (candidates × rounds ×
    BLOCK): one array, or one per shape profile.

    One array: the lowest median over all its runs wins. Per profile: the lowest
    geometric mean of the per-profile medians, and the ratios pool the same number of
    paired rounds from each profile (a fast profile runs more rounds in the same time).
    """
    import numpy as np

    from edgebuild.gates.regression import decide

    by_profile = blocks if isinstance(blocks, dict) else {"": blocks}
    medians = np.stack([np.median(b.reshape(len(names), -1), axis=1)
                        for b in by_profile.values()])  # profiles × candidates
    score = np.log(medians).sum(axis=0)  # the log of the geometric mean, times profiles
    best = int(np.argmin(score))
    rounds = min(b.shape[1] for b in by_profile.values())
    pooled = np.concatenate([b[:, :rounds] for b in by_profile.values()], axis=1)
    first = next(iter(by_profile.values())).reshape(len(names), -1)
    standings = []
    for i, name in enumerate(names):
        if i == best:
            verdict_ratio, low, high, slower = 1.0, 1.0, 1.0, False
        else:
            verdict = decide(pooled[best], pooled[i], threshold=0.0)
            verdict_ratio, low, high = verdict.ratio, verdict.low, verdict.high
            slower = verdict.decision == "regression"
        profiles = {} if not isinstance(blocks, dict) else {
            profile: {"median_ms": float(np.median(b[i])),
                      "p90_ms": float(np.percentile(b[i], 90))}
            for profile, b in blocks.items()}
        standings.append(Standing(name, float(medians[0, i]), float(np.percentile(first[i], 90)),
                                  verdict_ratio, low, high, slower, profiles))
    standings.sort(key=lambda s: score[names.index(s.name)])
    return Ranking(names[best], standings, int(pooled.shape[1]))


def pareto_front(points: dict[str, tuple[float, float]]) -> set[str]:
    """Names no other point beats: (latency, lower is better; agreement, higher is better)."""
    front = set()
    for name, (latency, agreement) in points.items():
        dominated = any(
            other != name and o_lat <= latency and o_agr >= agreement
            and (o_lat < latency or o_agr > agreement)
            for other, (o_lat, o_agr) in points.items())
        if not dominated:
            front.add(name)
    return front
