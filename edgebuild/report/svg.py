"""Inline SVG pictures for report.html, written as plain strings (no plotting library).

A fully cached `edgebuild run` must stay light, so nothing here imports numpy or
matplotlib: the plots are a few hundred elements of text. Every string that came
from a report is escaped; colours and fonts come from the page's CSS classes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape


def fmt(value: float) -> str:
    """A number as people read it on an axis: 0.25, 1.5, 20, 1.2e+03."""
    return format(value, ".3g")


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (numpy's default method)."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Axis:
    """Maps data values in [low, high] onto pixels [start, end], linearly or in log10."""

    low: float
    high: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        value = min(max(value, self.low), self.high)
        if self.log:
            share = math.log(value / self.low) / math.log(self.high / self.low)
        else:
            share = (value - self.low) / (self.high - self.low)
        return self.start + share * (self.end - self.start)

    def ticks(self) -> list[float]:
        if self.log:
            found = [m * 10.0 ** k
                     for k in range(math.floor(math.log10(self.low)),
                                    math.ceil(math.log10(self.high)) + 1)
                     for m in (1, 2, 5)]
            inside = [v for v in found if self.low <= v <= self.high]
            if len(inside) > 9:  # many decades: powers of ten only, thinned
                decades = [v for v in inside if math.isclose(math.log10(v) % 1, 0,
                                                              abs_tol=1e-9)]
                return decades[::math.ceil(len(decades) / 8)]
            if len(inside) >= 3:
                return inside
        span = self.high - self.low
        raw = span / 5
        magnitude = 10.0 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
        first = math.ceil(self.low / step)
        return [round(i * step, 12) for i in range(first, math.floor(self.high / step) + 1)]


def make_axis(values: Sequence[float], start: float, end: float, pad: float = 0.06) -> Axis:
    """An axis covering `values`; logarithmic when they span more than 5x (latencies)."""
    low, high = min(values), max(values)
    if low > 0 and high / low > 5:
        return Axis(low / (1 + pad * 3), high * (1 + pad * 3), start, end, log=True)
    margin = (high - low) * pad or abs(high) * 0.05 or 1.0
    return Axis(low - margin, high + margin, start, end)


def _x_axis(axis: Axis, y: float, label: str) -> list[str]:
    parts = [f'<line class="axis" x1="{axis.start:.1f}" y1="{y:.1f}" x2="{axis.end:.1f}" '
             f'y2="{y:.1f}"/>']
    for tick in axis.ticks():
        x = axis(tick)
        parts.append(f'<line class="axis" x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" '
                     f'y2="{y + 4:.1f}"/><text class="tick" x="{x:.1f}" y="{y + 15:.1f}" '
                     f'text-anchor="middle">{fmt(tick)}</text>')
    scale = " (log scale)" if axis.log else ""
    parts.append(f'<text class="axis-label" x="{axis.end:.1f}" y="{y + 30:.1f}" '
                 f'text-anchor="end">{escape(label)}{scale}</text>')
    return parts


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg class="plot" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}">'
            + "".join(body) + "</svg>")


def latency_plot(samples: Sequence[float], budget: float | None,
                 gated: tuple[str, float] | None, width: int = 1100) -> str:
    """A strip of the samples over a box plot (quartiles, Tukey whiskers), the gated
    percentile (purple) and the budget (red, dashed; the area past it shaded). A budget
    far past the samples is named at the right edge instead, so the spread stays visible."""
    ordered = sorted(samples)
    q1, median, q3 = (quantile(ordered, q) for q in (0.25, 0.5, 0.75))
    iqr = q3 - q1
    whisker_low = next(v for v in ordered if v >= q1 - 1.5 * iqr)
    whisker_high = next(v for v in reversed(ordered) if v <= q3 + 1.5 * iqr)
    wanted = [ordered[0], quantile(ordered, 0.99)] + ([gated[1]] if gated else [])
    far = budget is not None and not min(wanted) / 3 <= budget <= 3 * max(wanted)
    if budget is not None and not far:
        wanted.append(budget)
    axis = make_axis(wanted, 20, width - 20)
    body: list[str] = []
    if budget is not None and not far:
        x = axis(budget)
        body.append(f'<rect class="over-budget" x="{x:.1f}" y="30" width="{axis.end - x:.1f}" '
                    'height="90"/>')
    step = max(1, len(ordered) // 300)  # at most ~300 dots, in time order
    for i, value in enumerate(list(samples)[::step]):
        jitter = (i * 0.6180339887) % 1.0
        body.append(f'<circle class="sample" cx="{axis(value):.1f}" cy="{34 + 38 * jitter:.1f}" '
                    'r="1.7"/>')
    beyond = sum(1 for v in ordered if v > axis.high)
    if beyond:
        body.append(f'<text class="tick" x="{axis.start:.1f}" y="152">{beyond} slower '
                    f'sample(s) past {fmt(axis.high)} ms are off the scale</text>')
    y = 98.0
    body.append(f'<line class="whisker" x1="{axis(whisker_low):.1f}" y1="{y}" '
                f'x2="{axis(q1):.1f}" y2="{y}"/><line class="whisker" x1="{axis(q3):.1f}" '
                f'y1="{y}" x2="{axis(whisker_high):.1f}" y2="{y}"/>')
    for end in (whisker_low, whisker_high):
        body.append(f'<line class="whisker" x1="{axis(end):.1f}" y1="{y - 8}" '
                    f'x2="{axis(end):.1f}" y2="{y + 8}"/>')
    body.append(f'<rect class="box" x="{axis(q1):.1f}" y="{y - 14}" '
                f'width="{max(axis(q3) - axis(q1), 1):.1f}" height="28"><title>quartiles '
                f'{fmt(q1)}–{fmt(q3)} ms, median {fmt(median)} ms</title></rect>'
                f'<line class="median" x1="{axis(median):.1f}" y1="{y - 14}" '
                f'x2="{axis(median):.1f}" y2="{y + 14}"/>'
                f'<text class="tick" x="{axis(median):.1f}" y="{y + 25}" '
                f'text-anchor="middle">median {fmt(median)}</text>')
    taken: list[tuple[float, float]] = []
    marks = [("gated", f"{gated[0]} {fmt(gated[1])} ms", gated[1])] if gated else []
    if budget is not None and far:
        reference = gated or ("median", median)
        ratio = budget / reference[1]
        times = f"{ratio:.0f}× the" if ratio > 1 else f"1/{1 / ratio:.0f} of the"
        text = f"budget {fmt(budget)} ms: off the scale, {times} {reference[0]}"
        text_w = 7.2 * (len(text) + 2)
        at_right = ratio > 1
        left = axis.end - text_w if at_right else axis.start
        taken.append((left, left + text_w))
        body.append(f'<text class="mark-budget" x="{left:.1f}" y="13">'
                    + (f"{escape(text)} ▸" if at_right else f"◂ {escape(text)}") + "</text>")
    elif budget is not None:
        marks.append(("budget", f"budget {fmt(budget)} ms", budget))
    for css, text, value in marks:
        x = axis(value)
        body.append(f'<line class="{css}" x1="{x:.1f}" y1="28" x2="{x:.1f}" y2="118"/>')
        text_w = 7.2 * len(text)  # bold 11 px
        left = x + 4 if x + 4 + text_w <= width else x - 4 - text_w
        row = 13 if not any(left < b and a < left + text_w for a, b in taken) else 26
        taken.append((left, left + text_w))
        body.append(f'<text class="mark-{css}" x="{left:.1f}" y="{row}">{escape(text)}</text>')
    body += _x_axis(axis, 122, "latency per run, ms")
    return _svg(width, 160, body, "latency samples")


def pareto(points: dict[str, tuple[float, float]]) -> set[str]:
    """Names no other point dominates: (latency: lower is better, accuracy: higher is
    better). A point is dominated by one at least as good in both and better in one."""
    front = set()
    for name, (x, y) in points.items():
        if not any(other != name and ox <= x and oy >= y and (ox < x or oy > y)
                   for other, (ox, oy) in points.items()):
            front.add(name)
    return front


@dataclass
class Point:
    name: str
    x: float  # latency, ms
    y: float  # accuracy
    size_mb: float | None = None
    css: str = ""  # extra class: chosen | rejected | failed …
    note: str = ""  # tooltip text


@dataclass
class _Label:
    placed: list[tuple[float, float, float]] = field(default_factory=list)  # x0, x1, y

    def place(self, x: float, y: float, text: str) -> float:
        """A y near `y` where the label does not overlap one placed before."""
        x1 = x + 6.2 * len(text)
        for offset in (0, 12, -12, 24, -24, 36, -36, 48):
            candidate = y + offset
            if not any(x < bx1 and bx0 < x1 and abs(candidate - by) < 11
                       for bx0, bx1, by in self.placed):
                break
        self.placed.append((x, x1, candidate))
        return candidate


def scatter(points: Sequence[Point], x_label: str, y_label: str, width: int = 1000,
            height: int = 340) -> str:
    """Accuracy against latency, one circle per point (area by artifact size), the
    Pareto front ringed and joined by a dashed staircase."""
    left, right, top, bottom = 64, width - 190, 18, height - 46
    x_axis = make_axis([p.x for p in points], left, right, pad=0.08)
    y_axis = make_axis([p.y for p in points], bottom, top, pad=0.12)
    front = pareto({p.name: (p.x, p.y) for p in points})
    body = [f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>']
    for tick in y_axis.ticks():
        y = y_axis(tick)
        body.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}"/>'
                    f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" '
                    f'text-anchor="end">{fmt(tick)}</text>')
    body.append(f'<text class="axis-label" x="{left - 50}" y="{top - 6}">'
                f'{escape(y_label)}</text>')
    body += _x_axis(x_axis, bottom, x_label)
    steps = sorted((p for p in points if p.name in front), key=lambda p: (p.x, -p.y))
    if len(steps) > 1:
        path = [f"{x_axis(steps[0].x):.1f},{y_axis(steps[0].y):.1f}"]
        for before, after in itertools.pairwise(steps):
            path.append(f"{x_axis(after.x):.1f},{y_axis(before.y):.1f}")
            path.append(f"{x_axis(after.x):.1f},{y_axis(after.y):.1f}")
        body.append(f'<polyline class="front-line" points="{" ".join(path)}"/>')
    sizes = [p.size_mb for p in points if p.size_mb]
    largest = max(sizes) if sizes else 1.0
    labels = _Label()
    for p in sorted(points, key=lambda p: (p.y, p.x), reverse=True):
        x, y = x_axis(p.x), y_axis(p.y)
        radius = 4 + 9 * math.sqrt(p.size_mb / largest) if p.size_mb else 4
        classes = " ".join(c for c in ("point", p.css, "front" if p.name in front else "") if c)
        size = f", {fmt(p.size_mb)} MB" if p.size_mb is not None else ""
        tip = (f"{p.name}: {fmt(p.x)} ms, {fmt(p.y)}{size}"
               + ("; on the Pareto front" if p.name in front else "")
               + (f"; {p.note}" if p.note else ""))
        body.append(f'<circle class="{classes}" data-name="{escape(p.name)}" cx="{x:.1f}" '
                    f'cy="{y:.1f}" r="{radius:.1f}"><title>{escape(tip)}</title></circle>')
        text = p.name + (f" · {fmt(p.size_mb)} MB" if p.size_mb is not None else "")
        label_y = labels.place(x + radius + 4, y + 4, text)
        if label_y != y + 4:
            body.append(f'<line class="leader" x1="{x + radius:.1f}" y1="{y:.1f}" '
                        f'x2="{x + radius + 4:.1f}" y2="{label_y - 4:.1f}"/>')
        body.append(f'<text class="point-label" x="{x + radius + 4:.1f}" y="{label_y:.1f}">'
                    f'{escape(text)}</text>')
    return _svg(width, height, body, f"{y_label} against {x_label}")


def ratio_plot(rows: Sequence[tuple[str, float, float, float, float, str]],
               width: int = 1000) -> str:
    """Baseline comparison: per target the latency ratio with its 95 % interval, the
    no-change line at 1 and the regression threshold (rows: name, ratio, low, high,
    threshold as a ratio, decision)."""
    top, pitch = 22, 26
    height = top + pitch * len(rows) + 40
    values = [v for r in rows for v in r[1:5] if math.isfinite(v)] + [1.0]
    axis = make_axis(values, 200, width - 30, pad=0.15)
    body: list[str] = []
    bottom = top + pitch * len(rows)
    x = axis(1.0)
    body.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" '
                f'y2="{bottom:.1f}"/><text class="tick" x="{x:.1f}" y="{top - 10}" '
                'text-anchor="middle">no change</text>')
    for i, (name, ratio, low, high, threshold, decision) in enumerate(rows):
        y = top + pitch * i + pitch / 2
        body.append(f'<text class="point-label" x="190" y="{y + 4:.1f}" text-anchor="end">'
                    f'{escape(name)}</text>')
        if math.isfinite(threshold):
            x = axis(threshold)
            body.append(f'<line class="budget" x1="{x:.1f}" y1="{y - 10:.1f}" x2="{x:.1f}" '
                        f'y2="{y + 10:.1f}"/>')
        if not all(math.isfinite(v) for v in (ratio, low, high)):
            body.append(f'<text class="tick" x="{axis(1.0) + 6:.1f}" y="{y + 4:.1f}">'
                        f'{escape(decision)}: too few blocks</text>')
            continue
        body.append(f'<line class="ci {escape(decision)}" x1="{axis(low):.1f}" y1="{y:.1f}" '
                    f'x2="{axis(high):.1f}" y2="{y:.1f}"/><circle class="ratio '
                    f'{escape(decision)}" cx="{axis(ratio):.1f}" cy="{y:.1f}" r="4.5"><title>'
                    f'{escape(name)}: ×{ratio:.3f} [{low:.3f}–{high:.3f}], '
                    f'{escape(decision)}</title></circle>')
    body += _x_axis(axis, bottom + 4, "latency ratio, this build / baseline (95 % CI)")
    return _svg(width, height, body, "latency ratio to the baseline")


@dataclass
class Node:
    id: str
    inputs: list[str]
    outcome: str  # cached | built | failed | skipped | unmeasurable
    tip: str = ""


NODE_H, V_GAP, H_GAP = 34, 10, 44


def dag(nodes: Sequence[Node]) -> str:
    """The stages left to right by depth (longest path from a root), each column ordered
    by where its inputs sit, coloured by outcome; hover a stage for its details."""
    by_id = {n.id: n for n in nodes}
    depth: dict[str, int] = {}

    def level(node_id: str, seen: frozenset[str] = frozenset()) -> int:
        if node_id not in depth:
            ups = [u for u in by_id[node_id].inputs if u in by_id and u not in seen]
            depth[node_id] = 1 + max((level(u, seen | {node_id}) for u in ups), default=-1)
        return depth[node_id]

    for node in nodes:
        level(node.id)
    columns: list[list[Node]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in nodes:
        columns[depth[node.id]].append(node)
    lines = {n.id: _node_lines(n.id) for n in nodes}
    longest = max((len(t) for pair in lines.values() for t in pair), default=8)
    node_w = min(max(110, 6.3 * longest + 16), 210)
    pitch = NODE_H + V_GAP
    y_of: dict[str, float] = {}
    order = {n.id: i for i, n in enumerate(nodes)}
    for column in columns:
        # Each stage wants the mean height of its inputs; siblings fan out around it,
        # then overlaps are pushed down.
        wanted = {}
        for rank, node in enumerate(column):
            ups = [y_of[u] for u in node.inputs if u in y_of]
            wanted[node.id] = sum(ups) / len(ups) if ups else rank * pitch
        column.sort(key=lambda n: (wanted[n.id], order[n.id]))
        groups: dict[float, list[Node]] = {}
        for node in column:
            groups.setdefault(wanted[node.id], []).append(node)
        previous = -math.inf
        for target_y, group in groups.items():
            for i, node in enumerate(group):
                y = target_y + (i - (len(group) - 1) / 2) * pitch
                y_of[node.id] = previous = max(y, previous + pitch)
    top = min(y_of.values(), default=0.0)
    y_of = {k: v - top + V_GAP for k, v in y_of.items()}
    height = max(y_of.values(), default=0.0) + NODE_H + V_GAP
    x_of = {n.id: 10 + depth[n.id] * (node_w + H_GAP) for n in nodes}
    width = 20 + len(columns) * (node_w + H_GAP) - H_GAP
    body = ['<defs><marker id="eb-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
            'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="arrow"/>'
            '</marker></defs>']
    for node in nodes:
        for up in node.inputs:
            if up not in by_id:
                continue
            x1, y1 = x_of[up] + node_w, y_of[up] + NODE_H / 2
            x2, y2 = x_of[node.id], y_of[node.id] + NODE_H / 2
            middle = (x1 + x2) / 2
            body.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{middle:.1f},{y1:.1f} '
                        f'{middle:.1f},{y2:.1f} {x2 - 1:.1f},{y2:.1f}" '
                        'marker-end="url(#eb-arrow)"/>')
    for node in nodes:
        x, y = x_of[node.id], y_of[node.id]
        first, second = (_clip(t, node_w) for t in lines[node.id])
        tip = node.id + (f" — {node.outcome}" if node.outcome else "") + (
            f"\n{node.tip}" if node.tip else "")
        text_y = y + (14 if second else 21)
        body.append(f'<g class="stage {escape(node.outcome)}"><title>{escape(tip)}</title>'
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{node_w:.0f}" height="{NODE_H}" '
                    f'rx="5"/><text x="{x + 8:.1f}" y="{text_y:.1f}" class="op">'
                    f'{escape(first)}</text>'
                    + (f'<text x="{x + 8:.1f}" y="{y + 28:.1f}">{escape(second)}</text>'
                       if second else "") + "</g>")
    return _svg(width, height, body, "build graph")


def _node_lines(stage_id: str) -> tuple[str, str]:
    op, at, target = stage_id.partition("@")
    return (op, f"@{target}") if at else (op, "")


def _clip(text: str, width: float) -> str:
    room = int((width - 14) / 6.3)
    return text if len(text) <= room else text[:room - 1] + "…"
