"""The fidelity budget: the cheapest INT8 configuration whose output passes a gate.

A target declares the accuracy gate its INT8 build must pass (`quantize.budget.gate`,
the same schema as the target's `gates.accuracy`, usually the same YAML anchor). The
pass then tries the quantizer's levers cheapest first and stops at the first
configuration the gate passes, on the budget's dataset, with ONNX Runtime's CPU
kernels:

    as written ─▶ percentile ─▶ entropy ─▶ +reduce_range auto ─▶ +bias correction
      ─▶ +CLE ─▶ keep the most sensitive layers float (fewest, by bisection)

A calibration method is an alternative to the one before it; every other lever is
added to the best configuration so far and kept only if it raised the headroom. The
levers before the last cost nothing at run time (all layers stay INT8); keeping
layers in float does, which is why it comes last. Every trial is judged by the very
function the gate uses (fidelity/verdict.judge) and ranked by its *headroom*
(fidelity/limits.py). What was tried, what was kept and why, and the choice are the
stage's `budget` metadata (report.json); when nothing passes, the stage fails and
says which configuration came closest and by how much.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.share_cpu import yield_when_idle
from edgebuild.errors import StageError
from edgebuild.quant.prepare import prepare, quantize_prepared
from edgebuild.quant.prepared import Prepared
from edgebuild.quant.search.accuracy_aware import Verdict, keep_float_search

if TYPE_CHECKING:
    from edgebuild.data.loaders import Samples
    from edgebuild.quant.params import QuantizeParams
    from edgebuild.recipe.accuracy import AccuracyGate

# What each step changes in the quantize params; `keep_float` is the search itself.
METHOD_STEPS = ("percentile", "entropy")
OVERRIDES: dict[str, dict[str, Any]] = {
    "percentile": {"method": "percentile"},
    "entropy": {"method": "entropy"},
    "reduce_range": {"reduce_range": "auto"},
    "bias_correction": {"bias_correction": True},
    "equalize": {"equalize": {"clip": "exact"}},
    "seq_mse": {"engine": "aimet", "weight_rounding": "seq_mse"},
    "adaround": {"engine": "aimet", "weight_rounding": "adaround"},
}
# What the AIMET steps drop from the configuration so far: ONNX Runtime's own levers.
AIMET_STEPS = ("seq_mse", "adaround")
NOT_AIMET = ("reduce_range", "op_types", "ort_extra_options", "keep_activations",
             "dedicated_qdq_pair")
# Shown with every trial beside the metrics its gate limits (a CTC gate's sequence_match
# and cer, a detector's box_agreement): the figures a reader compares configurations by.
SHOWN = ("cosine", "top1_agreement", "decided_agreement", "top1", "psnr", "relative_error",
         "box_agreement", "map50")


@dataclass
class Trial:
    name: str
    params: QuantizeParams
    verdict: Verdict
    seconds: float
    kept: bool = False
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"step": self.name, "config": describe(self.params), "passed": self.verdict.passed,
                "headroom": round(self.verdict.score, 4), **self.verdict.record,
                "seconds": round(self.seconds, 1), "kept": self.kept, "why": self.why}


def describe(p: QuantizeParams) -> str:
    """The levers of a configuration in one line: `entropy, reduce_range auto, bias correction`."""
    parts = [p.method, "per-channel" if p.per_channel else "per-tensor"]
    if p.reduce_range is not False:
        parts.append(f"reduce_range {p.reduce_range}".replace("True", "true"))
    if p.bias_correction:
        parts.append("bias correction")
    if p.equalize is not None:
        parts.append(f"CLE {p.equalize.clip}")
    if p.engine == "aimet":
        parts.append(f"AIMET {p.weight_rounding.replace('_', ' ')}")
    return ", ".join(parts)


class Judge:
    """The gate's verdict on a quantized model, on the budget's dataset (ONNX Runtime CPU).

    A stream (`stream:`) is evaluated as the gates evaluate it: step by step, FP32 and
    each trial carrying the state it returns (`state`, the io's pairs), so a trial is
    judged on the error it accumulates over the stream, as its build will be."""

    def __init__(self, gate: AccuracyGate, source: Path, evaluation: Samples,
                 scratch: Path, state: Sequence[dict[str, Any]] = ()) -> None:
        self.gate, self.evaluation, self.scratch = gate, evaluation, scratch
        self.state = list(state)
        self.reference = scratch / "reference.npz"
        self.rows = self._save(source, self.reference)

    def _save(self, model: Path, path: Path) -> int:
        import onnxruntime as ort

        from edgebuild.data.stream import evaluate
        from edgebuild.fidelity.outputs import save_outputs

        so = ort.SessionOptions()
        so.log_severity_level = 3
        session = ort.InferenceSession(str(model), yield_when_idle(so),
                                       providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]

        def infer(feeds: dict[str, Any]) -> dict[str, Any]:
            return dict(zip(names, session.run(names, feeds), strict=True))

        rows = evaluate(self.evaluation, self.state, infer)
        save_outputs(path, rows, self.evaluation, {p["output"] for p in self.state})
        return len(rows)

    def confident_samples(self) -> int:
        """Samples of the budget's dataset on which FP32 scores what the gate needs: a
        detection gate's boxes at its `score_threshold`, a decision above `threshold`."""
        import numpy as np

        detection = self.gate.task.value == "detection"
        name = self.gate.scores if detection else self.gate.output
        threshold = self.gate.score_threshold if detection else self.gate.threshold
        if name is None or threshold is None:
            return 0
        with np.load(self.reference) as archive:
            if f"output:{name}" not in archive.files:
                return 0
            values = archive[f"output:{name}"]
        rows = values.reshape(len(values), -1) if values.ndim else values.reshape(1, -1)
        return int(np.sum((rows.max(axis=1) >= threshold) & (rows.max(axis=1) > 0)))

    def __call__(self, model: Path) -> Verdict:
        from edgebuild.fidelity.limits import LIMITS
        from edgebuild.fidelity.verdict import judge

        candidate = self.scratch / "candidate.npz"
        self._save(model, candidate)
        judged = judge(self.gate, candidate, self.reference)
        gated = {LIMITS[key].metric for key in judged.limits}
        shown = {k: round(v, 5) for k, v in judged.measured.items()
                 if k in gated or k in SHOWN}
        room = judged.headroom
        passed = judged.passed
        # A refusal (a blind whole-output metric, a NaN) fails with figures that may look
        # fine: a failing trial never outranks a passing one.
        room = max(room, 0.0) if passed else min(room, -1e-6)
        record: dict[str, Any] = {"metrics": shown}
        if not passed:
            record["failed"] = "; ".join(judged.failures) or judged.message
        return Verdict(passed, room, record)


def search(source: Path, destination: Path, p: QuantizeParams, calibration: Samples | None,
           evaluation: Samples, scratch: Path, state: Sequence[dict[str, Any]] = ()
           ) -> tuple[Prepared, QuantizeParams, dict[str, Any]]:
    """Try the budget's steps in order; write the first passing model to `destination`.
    `state`: the io's state pairs, carried step by step when `evaluation` is a stream.

    Returns the winner's prepared float model and params (the stage's per-layer report
    reads them) and the record for the stage's metadata. Raises StageError when no step passes.
    """
    assert p.budget is not None
    budget = p.budget
    started = time.monotonic()
    judge = Judge(budget.gate, source, evaluation, scratch, state)
    trials: list[Trial] = []
    best: tuple[Trial, Prepared, Path] | None = None

    def attempt(name: str, params: QuantizeParams) -> Trial:
        nonlocal best
        folder = scratch / f"{len(trials)}-{name}"  # calibration ranges cached per folder
        t0 = time.monotonic()
        prepared = prepare(source, params, calibration, folder)
        model = folder / "model.onnx"
        quantize_prepared(prepared, model, params, calibration, prepared.exclude, folder)
        trial = Trial(name, params, judge(model), time.monotonic() - t0)
        trials.append(trial)
        if best is None or trial.verdict.score > best[0].verdict.score:
            previous = best[0] if best is not None else None
            trial.kept = True
            trial.why = ("the first configuration" if previous is None else
                         f"headroom {trial.verdict.score:.3g} > {previous.verdict.score:.3g}")
            best = (trial, prepared, model)
        else:
            trial.why = f"headroom {trial.verdict.score:.3g} ≤ {best[0].verdict.score:.3g}"
        return trial

    chosen: Trial | None = None
    skipped: dict[str, str] = {}
    broken: dict[str, str] = {}  # steps whose lever raised on this model: their error
    if attempt("as written", p).verdict.passed:
        chosen = trials[-1]
    else:
        assert best is not None
        _refuse_clipped_scores(best[1], budget, p, judge, trials[-1])
    for step in budget.steps:
        if chosen is not None or time.monotonic() - started > budget.max_seconds:
            break
        assert best is not None
        base = best[0].params
        if step == "keep_float":
            chosen = _keep_float(base, best[1], destination, calibration, evaluation,
                                 scratch, judge, budget, trials, started)
            break
        params = _stepped(base, step, skipped)
        if params is None or params == base:
            continue
        try:
            passed = attempt(step, params).verdict.passed
        except Exception as exc:  # a lever this graph breaks: a step not taken, not a failure
            logging.getLogger(__name__).exception("budget step %s failed", step)
            broken[step] = f"{type(exc).__name__}: {exc}"[:300]
            skipped[step] = (f"the {step} lever raised on this model ({broken[step]}), so "
                             "the search went on without it; a lever that raises is a "
                             "defect of edgebuild: report it with the model and this error")
            continue
        if passed:
            chosen = trials[-1]
    record = {"gate": budget.gate.model_dump(exclude_none=True, exclude_defaults=True,
                                             mode="json"),
              "dataset": budget.gate.dataset, "samples": len(evaluation),
              **({"steps": judge.rows} if evaluation.steps is not None else {}),
              "trials": [t.to_json() for t in trials], "skipped": skipped,
              "seconds": round(time.monotonic() - started, 1)}
    assert best is not None
    if chosen is None:
        raise _nothing_passed(budget, len(evaluation), trials, skipped, broken, record)
    if chosen.name != "keep float":
        shutil.copyfile(best[2], destination)
    record.update(_chosen(p, chosen))
    return best[1], chosen.params, record


def _nothing_passed(budget: Any, samples: int, trials: list[Trial], skipped: dict[str, str],
                    broken: dict[str, str], record: dict[str, Any]) -> StageError:
    """The error when no trial passed: the closest, every trial's failure, what the time
    budget left untried and which levers raised, with the trials in its metadata."""
    closest = max(trials, key=lambda t: t.verdict.score)
    tried = "; ".join(f"{t.name}{_counts(t)}: {t.verdict.record.get('failed', '')}"
                      for t in trials)
    untried = [s for s in budget.steps  # the trial of step keep_float is "keep float"
               if s not in {t.name.replace(" ", "_") for t in trials} and s not in skipped]
    return StageError(
        f"no INT8 configuration passed the budget's gate on '{budget.gate.dataset}' "
        f"({samples} samples) after {len(trials)} trial(s) in "
        f"{record['seconds']:.0f} s; closest: {closest.name} ({describe(closest.params)}, "
        f"headroom {closest.verdict.score:.3g}, {closest.verdict.record.get('metrics')}). "
        f"Tried: {tried}" + (f". Not tried (time budget): {untried}" if untried else "")
        + "".join(f". {step} failed on this model ({error})"
                  for step, error in broken.items()),
        _advice(budget, trials, untried),
        # The trials are what a user reads next: the failed stage's report.json entry.
        metadata={"budget": {**record, "chosen": None, "closest": closest.name}})


def _chosen(p: QuantizeParams, chosen: Trial) -> dict[str, Any]:
    """The record's account of the trial that passed: its name, configuration, what it
    changed from the params as written, its metrics and headroom."""
    chosen.why = "the first to pass the gate" + (f"; {chosen.why}" if chosen.why else "")
    changed = _changed(p, chosen.params)
    if chosen.name == "keep float":
        changed["exclude_nodes"] = chosen.verdict.record["keep_float"]["kept_in_float"]
    return {"chosen": chosen.name, "config": describe(chosen.params), "params": changed,
            "metrics": chosen.verdict.record["metrics"],
            "headroom": round(chosen.verdict.score, 4)}


def _refuse_clipped_scores(prepared: Prepared, budget: Any, p: QuantizeParams,
                           judge: Judge, trial: Trial) -> None:
    """Stop before the levers when calibration never saw a score the detector (or the
    gate) needs: every lever calibrates on the same data, so none can raise the clip."""
    from edgebuild.core.thresholds import gate_sentences

    said = gate_sentences(prepared.metadata.get("score_range"), budget.gate)
    if not said:
        return
    confident = judge.confident_samples()
    where = (f"'{budget.gate.dataset}' (the budget's dataset) has {confident} image(s) "
             f"with FP32 detections: `calibration: {budget.gate.dataset}` would do"
             if confident and budget.gate.dataset != p.calibration else
             f"add such images to '{p.calibration}'")
    raise StageError(
        f"no INT8 configuration can pass the budget's gate on '{budget.gate.dataset}': "
        f"{said[0]} (as written: {trial.verdict.record.get('failed', '')}); the budget's "
        "levers were not tried, as each calibrates on the same data",
        f"calibrate on images with confident detections: {where}")


def _advice(budget: Any, trials: list[Trial], untried: Sequence[str]) -> str:
    """What to change when no step passed: only levers that were not tried, or limits
    that stopped a search early."""
    advice = []
    searched = next((t.verdict.record.get("keep_float") for t in trials
                     if t.name == "keep float"), None)
    if "keep_float" not in budget.steps:
        advice.append("add `keep_float` to budget.steps (it keeps the most sensitive "
                      "layers float)")
    elif searched is not None and searched.get("stopped") == "iterations":
        advice.append(f"raise budget.max_iterations ({budget.max_iterations}): the "
                      "keep_float search stopped before it found a count that passes")
    if untried or (searched is not None and searched.get("stopped") == "seconds"):
        advice.append(f"raise budget.max_seconds ({budget.max_seconds:g})")
    advice.append("loosen the gate, or build this target in fp16")
    return "; ".join(advice)


def _counts(trial: Trial) -> str:
    """The float-layer counts a keep-float search tried: ` (1, 2, 4 layers in float)`."""
    search = trial.verdict.record.get("keep_float")
    counts = [str(step["kept_in_float"]) for step in (search or {}).get("steps", [])]
    return f" ({', '.join(counts)} layers in float)" if counts else ""


def _stepped(base: QuantizeParams, step: str, skipped: dict[str, str]) -> QuantizeParams | None:
    """`base` with the step's lever, or None (and why in `skipped`) when it does not apply."""
    from pydantic import ValidationError

    update = OVERRIDES[step]
    if step in METHOD_STEPS and base.method == update["method"]:
        skipped[step] = (f"the configuration so far already calibrates with {step}: "
                         "nothing new to try")
        return None
    current = base.model_dump(exclude_unset=True)
    if step in AIMET_STEPS:
        from edgebuild.quant.engines.aimet import available

        if not available():
            skipped[step] = "aimet-onnx is not installed (pip install 'edgebuild[aimet]')"
            return None
        current = {k: v for k, v in current.items() if k not in NOT_AIMET}
        if current.get("method") == "percentile":
            current["method"] = "minmax"
    try:
        return base.model_validate({**current, **update})
    except ValidationError as exc:
        skipped[step] = (f"does not combine with the configuration so far "
                         f"({exc.errors()[0]['msg']}), so the search went on without it")
        return None


def _keep_float(base: QuantizeParams, prepared: Prepared, destination: Path,
                calibration: Samples | None, evaluation: Samples, scratch: Path,
                judge: Judge, budget: Any, trials: list[Trial], started: float) -> Trial | None:
    """The greedy last step: the fewest most-sensitive layers in float (keep_float_search)."""
    folder = scratch / f"{len(trials)}-keep-float"
    folder.mkdir(parents=True, exist_ok=True)
    left = max(budget.max_seconds - (time.monotonic() - started), 1.0)
    t0 = time.monotonic()
    found = keep_float_search(prepared, destination, base, calibration, evaluation, folder,
                              judge, budget.max_iterations, left)
    last = max(found.steps, key=lambda s: (s["passed"], -s["kept_in_float"] if s["passed"]
                                           else s["score"]))
    verdict = Verdict(bool(last["passed"]), float(last["score"]),
                           {k: last[k] for k in ("metrics", "failed") if k in last})
    trial = Trial("keep float", base, verdict, time.monotonic() - t0, kept=found.met)
    search = found.to_json()
    trial.why = (f"{len(found.kept)} layer(s) in float: {found.kept[:8]}" if found.met else
                 f"no count of float layers passed in {len(found.steps)} step(s)")
    trial.verdict.record["keep_float"] = search
    trials.append(trial)
    return trial if found.met else None


def _changed(original: QuantizeParams, chosen: QuantizeParams) -> dict[str, Any]:
    """The params the budget changed, as a recipe would write them."""
    before = original.model_dump(mode="json", exclude={"budget"})
    after = chosen.model_dump(mode="json", exclude={"budget"})
    return {k: v for k, v in after.items() if before.get(k) != v}
