"""Streams: a recurrent model evaluated step by step, each build carrying its own state.

Two declarations, because they belong to two things:

- the recipe's `state:` pairs a state input with the output that feeds it at the next
  step (`{input: state, output: stateN, initial: zeros}`): a property of the model;
- a dataset's `stream:` says how one of its samples (a recording) is cut into steps
  along an input's axis (`{axis: 1, hop: 512}`): a property of the data.

Reference and infer then run every sample as a sequence of steps, each feeding its own
state output back (edgebuild/data/stream.py), so an INT8 build is judged on the state it
computes itself, as deployed. Checked at validate time, at the lines written
(stream_check.py: the checks need the whole recipe, whose schema imports these).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.recipe.common import Strict


class StatePair(Strict):
    """A recurrent state: the input a step takes it by, the output the step returns it by."""

    input: str = Field(description="The state input (one of `inputs:`, usually "
                       "`batch_axis: null`).")
    output: str = Field(description="The output that is the next step's `input` (one of "
                        "`outputs:`), same shape and dtype.")
    initial: Literal["zeros"] | float = Field(
        "zeros", description="The state before a sequence's first step: `zeros`, or a "
        "number every element takes. A dataset that gives the input gives each sample's "
        "own. Also what latency runs and generated inputs start from (the input's `value`).")

    @property
    def initial_value(self) -> float:
        return 0.0 if self.initial == "zeros" else float(self.initial)


class StreamSteps(Strict):
    """How a dataset's sample is cut into the model's steps.

    Consecutive windows along one axis of one input, in order, each `hop` new values
    after the previous window's last `window - hop` (zeros before the first). A tail
    shorter than `hop` is dropped."""

    input: str | None = Field(None, description="The input cut into steps; default: the "
                              "dataset's `input` (its first model input).")
    axis: int = Field(ge=1, description="The input's axis (as the model takes it: 0 is the "
                      "batch) the sequence runs along, e.g. 1 for audio `[1, samples]`.")
    hop: int = Field(ge=1, description="New values per step; the window is the input's "
                     "declared size along `axis` (Silero VAD: 512 new samples in a 576 "
                     "window, so each step also sees the previous step's last 64).")
    reset: Literal["sample", "never"] = Field(
        "sample", description="`sample`: the state starts again from `initial` at each "
        "sample (each recording); `never`: it is carried from one sample's last step to "
        "the next sample's first (each sample's first window still starts with zeros).")
