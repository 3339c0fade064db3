"""The one latency protocol (timing.py), the conditions a figure was measured under
(conditions.py) and its statistics (stats.py); used by the latency gate, the
regression gate (`run --baseline`) and a search's `select`."""
