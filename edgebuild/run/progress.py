"""One line per stage event on stderr, for `edgebuild run` and `edgebuild profile`.

Light: the CLI imports it (no vendor library, no numpy).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edgebuild.execute.result import StageRun
    from edgebuild.plan.planner import Plan
    from edgebuild.plan.stage import Stage


def one_line(text: str) -> str:
    """A converter's message may carry a tool's carriage returns: a CI log shows them
    as garbage or overwritten lines, so each becomes a space."""
    return " ".join(text.replace("\r\n", "\n").replace("\r", "\n").splitlines())


class ProgressPrinter:
    """One line per stage event on stderr, never redrawn: fine in a terminal and in CI logs."""

    def __init__(self, total: int = 0) -> None:
        self.total = total  # the driver says it ("planned"): the CLI need not plan twice
        self.done = 0

    def __call__(self, event: str, item: StageRun | Stage | Plan) -> None:
        from edgebuild.execute.result import StageRun
        from edgebuild.plan.stage import Stage

        if event == "planned" and not isinstance(item, StageRun | Stage):
            self.total = len(item.graph)
            return
        if event == "start" and isinstance(item, Stage):
            print(f"        run     {item.id} ...", file=sys.stderr, flush=True)
            return
        if not isinstance(item, StageRun):
            return
        self.done += 1
        timing = f" {item.seconds:.1f}s" if item.seconds else ""
        note = f"  {one_line(item.message)}" if item.message else ""
        counter = f"[{self.done:>2}/{self.total}]"
        print(f"{counter} {item.outcome.value:<7} {item.stage.id}{timing}{note}",
              file=sys.stderr, flush=True)
