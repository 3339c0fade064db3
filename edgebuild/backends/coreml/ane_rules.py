"""Neural Engine placement rules for MIL ops, each with its public source.

Apple publishes no list of the ops the Neural Engine runs; these rules come from
the sources below. An op not listed is "unknown", never assumed to run there.
"""

from __future__ import annotations

SOURCES: dict[str, str] = {
    "fp16": "coremltools docs, 'Typed Execution' / compute precision: the Neural Engine "
            "computes in float16 only",
}

# MIL op type -> (status, reason, source key); status: ane | fallback | partial
OP_RULES: dict[str, tuple[str, str, str]] = {}

# (key, rule, source key)
GENERAL_RULES: list[tuple[str, str, str]] = [
    ("flexible", "flexible (range) shapes may keep a model off the Neural Engine; "
                 "enumerated shapes are preferred", "fp16"),
]
