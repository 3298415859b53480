"""Template helpers for job pages: durations, short digests, result classes."""

from __future__ import annotations

from django import template

from dashboard.jobs.progress import succeeded

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """``seconds`` as ``1 h 02 min``, ``3 min 05 s`` or ``12 s``; ``—`` when unknown."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


@register.filter
def outcome(result) -> str:
    """CSS class of a result row: ``ok``, ``failed``, ``skipped`` or ``open``."""
    if result.status in ("pending", "queued", "running"):
        return "open"
    if result.status == "skipped":
        return "skipped"
    return "ok" if succeeded(result.job.kind, result.status) else "failed"
