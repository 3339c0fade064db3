"""Every kind of gate, in the order a target's results are reported (report.json keeps it).

    KINDS ─▶ evaluate_target: each kind's results, in this order
    failure(result) ─▶ the kind named by the result's gate ─▶ its sentence (run/search)
"""

from __future__ import annotations

from edgebuild.gates.kind import GateKind
from edgebuild.gates.kinds.accuracy import AccuracyKind
from edgebuild.gates.kinds.latency import LatencyKind
from edgebuild.gates.kinds.memory import MemoryKind
from edgebuild.gates.kinds.paired import RegressionKind, SpeedupKind
from edgebuild.gates.kinds.size import SizeKind
from edgebuild.gates.kinds.throughput import ThroughputKind
from edgebuild.gates.result import GateResult

KINDS: tuple[GateKind, ...] = (AccuracyKind(), LatencyKind(), RegressionKind(), SpeedupKind(),
                               ThroughputKind(), SizeKind(), MemoryKind())
_BY_KEY = {kind.key: kind for kind in KINDS}


def failure(result: GateResult) -> str:
    """The part of a result's message that says what failed, as its kind words it
    (`accuracy[…]` and `latency[…]` are their kinds')."""
    kind = _BY_KEY.get(result.gate.partition("[")[0])
    return kind.failure(result) if kind is not None else result.message
