"""select: time a search's passing candidates against each other and keep the fastest.

Each candidate's own `measure-latency` stage ran at a different moment, and on
a shared machine moments differ by ±20 %, so the minimum of those medians is
partly a draw. This stage loads every candidate that passed its gates into one
process and times them round-robin in blocks, rotating who goes first each round
(the latency protocol, edgebuild/measure/timing.py).

The candidate with the lowest median over all its runs wins; every other one
is reported as a ratio to the winner with a 95 % interval from a bootstrap over
paired rounds (`decide` in regression.py), so a reader sees whether the win is
real or within noise. The stage's key covers exactly the passing candidates'
artifacts and settings: a re-run with the same gate outcomes reuses it.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.op import OpResult, StageContext
from edgebuild.gates.latency import InterleavedTiming
from edgebuild.measure.conditions import conditions
from edgebuild.measure.timing import time_blocks
from edgebuild.recipe.common import MeasureSettings
from edgebuild.registry import load_backend

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np


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
    version = 1
    Params = SelectParams
    produces = "selection"
    summary = "time a search's passing candidates interleaved and pick the fastest"

    def run(self, ctx: StageContext, params: Any) -> OpResult:
        import numpy as np

        from edgebuild.passes.torch_model import sample_inputs

        assert ctx.target is not None
        p: SelectParams = params
        backend = load_backend(ctx.target.backend)
        reason = backend.unmeasurable_reason(ctx.target)
        if reason:
            return OpResult(main="", format=self.produces, unmeasurable=reason)
        settings = ctx.target.measure
        (feeds,) = sample_inputs(ctx.io.inputs, seed=0, count=1)
        before = conditions(settings.threads)
        with ExitStack() as stack:
            runs = []
            for candidate in p.candidates:
                info = ctx.target.variant(
                    f"{ctx.target.name}[{candidate.name}]", candidate.options,
                    MeasureSettings.model_validate(candidate.measure))
                runner = stack.enter_context(backend.runner(
                    ctx.input(candidate.name), info, candidate.measure.get("threads")))
                runs.append(_bind(runner, feeds))
            blocks = time_blocks(runs, settings)
        np.save(ctx.out / "blocks_ms.npy", blocks)
        ranking = rank(blocks, [c.name for c in p.candidates])
        return self.finish(ctx, "selection.json", ranking.to_json(), before)


def _bind(runner: Any, feeds: dict[str, Any]) -> Callable[[], Any]:
    return lambda: runner.infer(feeds)


@dataclass(frozen=True)
class Standing:
    """One compared candidate: its interleaved median and how it relates to the winner."""

    name: str
    median_ms: float
    p90_ms: float
    ratio: float  # its median / the winner's, per paired round; 1.0 for the winner
    low: float
    high: float
    slower: bool  # the interval lies above 1: a real difference, not noise

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "median_ms": round(self.median_ms, 4),
                "p90_ms": round(self.p90_ms, 4), "ratio": round(self.ratio, 4),
                "ci95": [round(self.low, 4), round(self.high, 4)], "slower": self.slower}


@dataclass(frozen=True)
class Ranking:
    chosen: str
    standings: list[Standing]  # fastest first
    rounds: int

    @property
    def tied(self) -> list[str]:
        """Candidates the measurement cannot tell apart from the winner."""
        return [s.name for s in self.standings if s.name != self.chosen and not s.slower]

    def to_json(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "rounds": self.rounds, "tied": self.tied,
                "candidates": [s.to_json() for s in self.standings]}


def rank(blocks: np.ndarray, names: list[str]) -> Ranking:
    """The winner (lowest median over all its runs) and everyone's ratio to it."""
    import numpy as np

    from edgebuild.gates.regression import decide

    flat = blocks.reshape(len(names), -1)
    medians = np.median(flat, axis=1)
    best = int(np.argmin(medians))
    standings = []
    for i, name in enumerate(names):
        if i == best:
            verdict_ratio, low, high, slower = 1.0, 1.0, 1.0, False
        else:
            verdict = decide(blocks[best], blocks[i], threshold=0.0)
            verdict_ratio, low, high = verdict.ratio, verdict.low, verdict.high
            slower = verdict.decision == "regression"
        standings.append(Standing(name, float(medians[i]), float(np.percentile(flat[i], 90)),
                                  verdict_ratio, low, high, slower))
    standings.sort(key=lambda s: s.median_ms)
    return Ranking(names[best], standings, int(blocks.shape[1]))


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
