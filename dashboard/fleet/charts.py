"""Bar charts of the audit page: threads per class and stored bytes per mode (server-side SVG geometry).

The strict CSP allows no inline script or style: the template draws
``<rect>`` and ``<text>`` elements at the positions computed here. One
horizontal bar per item, scaled to the largest value; the labels carry the
value in its unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dashboard.threads.charts import human_bytes

__all__ = ["BarChart", "HBar", "bar_chart", "census_chart", "storage_chart"]

WIDTH, ROW, LABEL = 640, 24, 170
#: fill per thread class / per mode (SVG presentation attributes).
FILLS = {"full": "#245ea8", "delta": "#7a3db8", "delta_counters_only": "#9b6fd0", "migrated": "#4a78b5",
         "inconsistent": "#a15c00"}


@dataclass(frozen=True)
class HBar:
    """One bar: its row's ``y`` (SVG units), the bar's ``width``, its ``fill``, the ``label`` and the ``value`` text."""

    y: float
    width: float
    fill: str
    label: str
    value: str


@dataclass(frozen=True)
class BarChart:
    """The chart's viewBox size, where the bars start (``x``), and its bars."""

    width: int
    height: int
    x: int
    bars: list[HBar]


def bar_chart(items: dict[str, int], fmt: Callable[[int], str], labels: dict[str, str] | None = None) -> BarChart:
    """One bar per ``items`` entry (``{key: value}``, in order), scaled to the largest value (0 draws nothing)."""
    peak = max(items.values(), default=0) or 1
    usable = WIDTH - LABEL - 90
    bars = [HBar(i * ROW, round(usable * v / peak, 2), FILLS.get(k, "#66707a"), (labels or {}).get(k, k), fmt(v))
            for i, (k, v) in enumerate(items.items())]
    return BarChart(WIDTH, max(ROW * len(bars), ROW), LABEL, bars)


def census_chart(census: dict[str, int], words: dict[str, str] | None = None) -> BarChart:
    """Threads per class (counts), labelled in words when ``words`` gives them."""
    return bar_chart(census, lambda n: f"{n:,} thread{'s' if n != 1 else ''}", words)


def storage_chart(storage: dict[str, dict[str, int]]) -> BarChart:
    """Stored bytes per mode (``bytes_total`` of :func:`deerflow.inventory.storage_by_mode`)."""
    return bar_chart({mode: t["bytes_total"] for mode, t in storage.items()}, human_bytes,
                     {mode: f"{mode} ({t['threads']:,} threads)" for mode, t in storage.items()})
