"""Pictures of a job's page: throughput over time and the per-thread growth factor of a dry run.

Server-side SVG geometry, like :mod:`dashboard.threads.charts` and
:mod:`dashboard.fleet.charts`: the templates draw ``<rect>``, ``<line>`` and
``<text>`` elements at the positions computed here (attributes only, no
inline style or script: the CSP stays strict). Labels are plain text that
the templates escape.

* :func:`throughput_chart`: threads finished per interval, from the
  :attr:`ThreadResult.finished_at <dashboard.jobs.models.ThreadResult>` the
  worker records when it writes a row's outcome (skipped rows, which never
  ran, are left out). The interval is the smallest of :data:`INTERVALS` that
  splits the job's duration (its start to its end, or to the newest finish
  while it runs) into at most :data:`MAX_INTERVALS` bars.
* :func:`growth_chart`: a finished dry run's factor per thread, bytes after /
  bytes before (a conversion dry run grows, a compaction dry run shrinks),
  the :data:`TOP` heaviest threads after (the rest counted), outliers as
  :func:`confirm_rows` marks them. A thread id longer than :data:`LABEL_CELLS` is shortened in the
  middle for its label (both ends stay readable); the bar's tooltip holds the whole id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median

from dashboard.formatting import middle_ellipsis, reveal_controls
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.threads.charts import Tick, human_bytes

__all__ = ["ConfirmRow", "GROWTH_OUTLIER", "GrowthBar", "GrowthChart", "INTERVALS", "LABEL_CELLS", "MAX_INTERVALS",
           "SIZE_OUTLIER", "TOP", "ThroughputBar", "ThroughputChart", "confirm_rows", "finish_times", "growth_chart",
           "interval_words", "throughput_chart"]

#: A thread is an outlier when its growth factor is this many times the median growth ...
GROWTH_OUTLIER = 2.0
#: ... or its size after conversion this many times the median size after.
SIZE_OUTLIER = 3.0


@dataclass(frozen=True)
class ConfirmRow:
    """One thread to convert: the dry run's result, ``growth`` (after / before, ``None`` from 0 bytes), ``outlier``."""

    result: ThreadResult
    growth: float | None
    outlier: bool


def confirm_rows(results: list[ThreadResult]) -> list[ConfirmRow]:
    """The rows of the page, heaviest after-size first, outliers marked (see :data:`GROWTH_OUTLIER`)."""
    growths = [r.bytes_after / r.bytes_before for r in results if r.bytes_before]
    mid_growth = median(growths) if growths else 0.0
    mid_after = median([r.bytes_after for r in results]) if results else 0
    rows = []
    for r in sorted(results, key=lambda r: (-r.bytes_after, r.thread_id)):
        growth = r.bytes_after / r.bytes_before if r.bytes_before else None
        outlier = len(results) > 2 and ((growth is not None and mid_growth and growth > GROWTH_OUTLIER * mid_growth)
                                        or (mid_after and r.bytes_after > SIZE_OUTLIER * mid_after))
        rows.append(ConfirmRow(r, growth, bool(outlier)))
    return rows

#: Candidate interval sizes of the throughput chart (seconds): 1 s up to 1 day.
INTERVALS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
#: At most this many bars in the throughput chart (longer jobs take a wider interval).
MAX_INTERVALS = 60
#: A bar is never wider than the plot's width over this many (a job of a few intervals is not one wide block).
MIN_SLOTS = 12
#: The growth chart shows this many threads, the heaviest after first.
TOP = 20

WIDTH, HEIGHT = 720, 180
#: room for the y axis labels (left), the top, the x axis labels (bottom), SVG units.
LEFT, TOP_PAD, BOTTOM = 56, 26, 40
#: the growth chart's rows: label column, row height, room for the value text on the right.
LABEL, ROW, VALUE = 210, 28, 230
#: a growth label's most character cells; the template draws labels in a 13-unit monospace font (a cell is
#: 0.6 em, 7.8 units), so 24 cells take 187 units of the label column's LABEL - 8.
LABEL_CELLS, LABEL_FONT = 24, 13
#: the least room between two growth-axis labels (SVG units): a closer one is left out (its line stays).
TICK_GAP = 56
FILL, OUTLIER_FILL, AXIS = "#4a78b5", "#c0392b", "#66707a"


def interval_words(seconds: int) -> str:
    """``30`` -> ``"30 s"``, ``60`` -> ``"minute"``, ``300`` -> ``"5 min"``, ``3600`` -> ``"hour"``,
    ``7200`` -> ``"2 h"``."""
    for unit, size, one in (("d", 86400, "day"), ("h", 3600, "hour"), ("min", 60, "minute")):
        if seconds >= size and seconds % size == 0:
            return one if seconds == size else f"{seconds // size} {unit}"
    return "second" if seconds == 1 else f"{seconds} s"


def _offset_words(seconds: float) -> str:
    """An x axis label: the time since the job started (``"0 s"``, ``"45 s"``, ``"12 min"``, ``"2.5 h"``)."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class ThroughputBar:
    """One interval: ``x``, ``y``, ``width``, ``height`` (SVG units), ``count`` (threads finished in it), a tooltip."""

    x: float
    y: float
    width: float
    height: float
    count: int
    title: str


@dataclass(frozen=True)
class ThroughputChart:
    """The throughput chart: viewBox, bars (one per interval, oldest left), axes, totals.

    Attributes:
        interval_s: the interval one bar counts (seconds); ``interval`` the same in words.
        finished: threads counted (rows with an outcome and a finish time, skipped ones excluded).
        peak: the most threads finished in one interval.
    """

    width: int
    height: int
    bars: list[ThroughputBar]
    interval_s: int
    interval: str
    finished: int
    peak: int
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    left: int = LEFT
    top: int = TOP_PAD
    base: int = HEIGHT - BOTTOM
    right: int = WIDTH - 4


def finish_times(job: ConversionJob) -> list[dt.datetime]:
    """When each of ``job``'s rows that ran to an outcome finished (one query, one column): open rows (no outcome
    yet) and ``skipped`` ones (cancelled before they ran) are left out."""
    return list(job.results.exclude(status__in=(*ThreadResult.OPEN, ThreadResult.SKIPPED))
                .exclude(finished_at=None).values_list("finished_at", flat=True))


def throughput_chart(finished: Iterable[dt.datetime], started_at: dt.datetime | None,
                     ended_at: dt.datetime | None = None) -> ThroughputChart | None:
    """Threads finished per interval from ``started_at`` (the job's start; default the first finish) to
    ``ended_at`` (the job's end; default the newest finish), or ``None`` when nothing finished.

    Args:
        finished: the finish time of each thread that ran (:func:`finish_times`), in any order.
    """
    times = sorted(finished)
    if not times:
        return None
    start = min(started_at or times[0], times[0])
    end = max(ended_at or times[-1], times[-1])
    span = (end - start).total_seconds()
    interval = next((s for s in INTERVALS if span < s * MAX_INTERVALS), INTERVALS[-1])
    n = int(span // interval) + 1
    counts = [0] * n
    for t in times:
        counts[min(int((t - start).total_seconds() // interval), n - 1)] += 1
    peak = max(counts)
    base, usable = HEIGHT - BOTTOM, HEIGHT - BOTTOM - TOP_PAD
    slot = (WIDTH - 4 - LEFT) / max(n, MIN_SLOTS)
    words = interval_words(interval)
    bars = []
    for i, c in enumerate(counts):
        h = round(usable * c / peak, 2)
        title = (f"{_offset_words(i * interval)} – {_offset_words((i + 1) * interval)} after the start: "
                 f"{c:,} thread{'s' if c != 1 else ''} finished")
        bars.append(ThroughputBar(round(LEFT + i * slot, 2), round(base - h, 2), round(max(slot * 0.85, 0.5), 2),
                                  h, c, title))
    y_ticks = [Tick(round(base - usable * v / peak, 2), f"{v:,}") for v in sorted({0, peak // 2, peak})]
    step = max(1, -(-n // 6))
    x_ticks = [Tick(round(LEFT + i * slot, 2), _offset_words(i * interval)) for i in range(0, n, step)]
    return ThroughputChart(WIDTH, HEIGHT, bars, interval, words, len(times), peak, y_ticks, x_ticks)


@dataclass(frozen=True)
class GrowthBar:
    """One thread: its row's ``y``, the bar's ``width`` (SVG units, proportional to ``factor``), ``fill``,
    the ``thread_id`` (the tooltip), the ``factor`` and its ``value`` text, ``outlier``, and the ``label``: the
    id with hidden characters shown (:func:`~dashboard.formatting.reveal_controls`), at most
    :data:`LABEL_CELLS` cells (:func:`~dashboard.formatting.middle_ellipsis`). The template escapes all text."""

    y: float
    width: float
    fill: str
    thread_id: str
    factor: float
    value: str
    outlier: bool
    label: str = ""


@dataclass(frozen=True)
class GrowthChart:
    """The growth chart: viewBox, where bars start (``x``), the bars, the x position of factor 1 (``one``),
    the threads not drawn (``rest``), the outliers among all threads (``outliers``) and the labels' font size
    (``label_font``, SVG units, monospace)."""

    width: int
    height: int
    x: int
    bars: list[GrowthBar]
    one: float
    shown: int
    rest: int
    outliers: int
    peak: float
    base: int = 0
    ticks: list[Tick] = field(default_factory=list)
    label_font: int = LABEL_FONT


def _spaced_ticks(usable: float, peak: float) -> list[Tick]:
    """The growth axis's labels × 0, × peak and × 1, each kept only at least :data:`TICK_GAP` units from the
    ones kept before it (× 1 sits near × 0 when the peak is large; the dashed line still marks it)."""
    kept: list[Tick] = []
    for f in dict.fromkeys((0.0, round(peak, 2), 1.0)):
        pos = round(LABEL + usable * f / peak, 2)
        if all(abs(pos - t.pos) >= TICK_GAP for t in kept):
            kept.append(Tick(pos, f"× {f:g}"))
    return sorted(kept, key=lambda t: t.pos)


def growth_chart(results: list[ThreadResult], top: int = TOP) -> GrowthChart | None:
    """The factor (bytes after / bytes before) of each of ``results`` (the rows the dry run would rewrite), the
    ``top`` heaviest after first, or ``None`` when none has bytes before (nothing to divide by).

    A bar's width is proportional to its factor (the largest shown spans the plot); a line marks factor 1
    (no change). Outliers are those :func:`confirm_rows` marks, over all rows.
    """
    rows = [r for r in confirm_rows(results) if r.growth is not None]
    if not rows:
        return None
    shown = rows[:top]
    peak = max(max(r.growth for r in shown), 1.0)
    usable = WIDTH - LABEL - VALUE
    bars = []
    for i, r in enumerate(shown):
        res = r.result
        value = f"× {r.growth:.2f} ({human_bytes(res.bytes_before)} → {human_bytes(res.bytes_after)})"
        bars.append(GrowthBar(i * ROW, round(usable * r.growth / peak, 2), OUTLIER_FILL if r.outlier else FILL,
                              res.thread_id, r.growth, value, r.outlier,
                              middle_ellipsis(reveal_controls(res.thread_id), LABEL_CELLS)))
    base = ROW * len(bars)
    ticks = _spaced_ticks(usable, peak)
    return GrowthChart(WIDTH, base + 24, LABEL, bars, round(LABEL + usable / peak, 2), len(shown),
                       len(rows) - len(shown), sum(r.outlier for r in rows), peak, base, ticks)
