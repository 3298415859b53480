"""Server-side geometry for the thread page's storage chart (inline SVG, attributes only).

The strict CSP allows no inline script or style, so the template draws
``<rect>``, ``<line>`` and ``<text>`` elements whose position, size and
``fill`` are computed here. Long threads are bucketed into at most
:data:`MAX_BARS` bars; a bar is the mean bytes per checkpoint of its bucket,
stacked as checkpoint row / blobs / writes. The y axis is in bytes per
checkpoint (ticks at 0, half the peak and the peak, in B/KB/MB), the x axis
in checkpoint positions (oldest left); a mark above a bar says its bucket
holds a delta snapshot (:attr:`deerflow.inventory.footprint.CheckpointBytes.snapshot`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deerflow.inventory import CheckpointBytes

__all__ = ["MAX_BARS", "Bar", "Chart", "Tick", "bytes_chart", "human_bytes"]

MAX_BARS = 120
WIDTH, HEIGHT, PAD = 720, 190, 4
#: room for the y axis labels (left), the snapshot marks (top) and the x axis labels (bottom), SVG units.
LEFT, TOP, BOTTOM = 64, 12, 22
#: fill colour per stacked part (SVG presentation attributes, not CSS).
COLOURS = {"checkpoint": "#4a78b5", "blobs": "#d08c2c", "writes": "#6aa84f"}


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``"1.5 KB"`` (powers of 1024, one decimal)."""
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


@dataclass(frozen=True)
class Segment:
    """One coloured part of a bar (SVG units)."""

    y: float
    height: float
    fill: str


@dataclass(frozen=True)
class Bar:
    """One bar: x position and width (SVG units), its stacked segments, a tooltip, and whether its
    checkpoints include a delta snapshot."""

    x: float
    width: float
    segments: list[Segment]
    title: str
    snapshot: bool = False


@dataclass(frozen=True)
class Tick:
    """An axis label at ``pos`` (y for the y axis, x for the x axis; SVG units)."""

    pos: float
    label: str


@dataclass(frozen=True)
class Chart:
    """The whole chart: viewBox size, bars, and the scale and bucketing shown under it."""

    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    peak: str = ""
    per_bar: int = 1
    checkpoints: int = 0
    total: str = ""
    legend: dict[str, str] = field(default_factory=lambda: dict(COLOURS))
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    snapshots: int = 0
    left: int = LEFT
    top: int = TOP
    base: int = HEIGHT - BOTTOM


def _buckets(series: list[CheckpointBytes]) -> list[list[CheckpointBytes]]:
    size = max(1, -(-len(series) // MAX_BARS))
    return [series[i:i + size] for i in range(0, len(series), size)]


def bytes_chart(series: list[CheckpointBytes]) -> Chart | None:
    """Bars for ``series`` (oldest checkpoint left) with axes and snapshot marks, or ``None`` when there is
    nothing to draw."""
    if not series:
        return None
    buckets = _buckets(series)
    means = [{part: sum(getattr(c, part) for c in b) / len(b) for part in COLOURS} for b in buckets]
    peak = max(sum(m.values()) for m in means) or 1
    slot = (WIDTH - LEFT - PAD) / len(buckets)
    base = HEIGHT - BOTTOM
    usable = base - TOP
    bars = []
    for i, (bucket, mean) in enumerate(zip(buckets, means, strict=True)):
        y = base
        segments = []
        for part, colour in COLOURS.items():
            h = usable * mean[part] / peak
            y -= h
            segments.append(Segment(round(y, 2), round(h, 2), colour))
        first, last = bucket[0], bucket[-1]
        span = first.checkpoint_id if len(bucket) == 1 else f"{first.checkpoint_id} … {last.checkpoint_id}"
        snapshot = any(c.snapshot for c in bucket)
        title = (f"{span}: {human_bytes(int(sum(mean.values())))} per checkpoint "
                 f"(row {human_bytes(int(mean['checkpoint']))}, blobs {human_bytes(int(mean['blobs']))}, "
                 f"writes {human_bytes(int(mean['writes']))})" + ("; holds a delta snapshot" if snapshot else ""))
        bars.append(Bar(round(LEFT + i * slot, 2), round(max(slot * 0.85, 0.5), 2), segments, title, snapshot))
    y_ticks = [Tick(round(base - usable * f, 2), human_bytes(int(peak * f))) for f in (0, 0.5, 1)]
    per = len(buckets[0])
    x_ticks = [Tick(round(LEFT + i * slot, 2), f"{i * per + 1:,}") for i in _x_positions(len(buckets))]
    return Chart(WIDTH, HEIGHT, bars, human_bytes(int(peak)), per, len(series),
                 human_bytes(sum(c.total for c in series)), y_ticks=y_ticks, x_ticks=x_ticks,
                 snapshots=sum(c.snapshot for c in series))


def _x_positions(bars: int, labels: int = 6) -> list[int]:
    """Bar indexes to label on the x axis: the first and about ``labels`` evenly spaced ones."""
    step = max(1, -(-bars // labels))
    return list(range(0, bars, step))
