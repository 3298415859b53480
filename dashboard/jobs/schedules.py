"""A retention policy's schedule: a five-field crontab read by Celery's own :class:`celery.schedules.crontab`.

Beat asks :func:`is_due` of every enabled policy each minute (:mod:`dashboard.jobs.policies`); the policy
form checks a schedule with :func:`parse_schedule` before it is saved.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from celery.schedules import crontab
from django.utils import timezone

__all__ = ["InvalidSchedule", "is_due", "parse_schedule"]


class InvalidSchedule(ValueError):
    """A policy's schedule is not a five-field crontab Celery can read."""


def parse_schedule(text: str) -> crontab:
    """The :class:`celery.schedules.crontab` of ``"minute hour day-of-month month day-of-week"``.

    Raises:
        InvalidSchedule: not five fields, or a field Celery's crontab refuses (e.g. minute 61).
    """
    fields = (text or "").split()
    if len(fields) != 5:
        raise InvalidSchedule(f"a schedule has five crontab fields (minute hour day-of-month month day-of-week), "
                              f"e.g. \"0 3 * * *\"; got {text!r}")
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    try:
        schedule = crontab(minute=minute, hour=hour, day_of_month=day_of_month, month_of_year=month_of_year,
                           day_of_week=day_of_week)
        schedule.remaining_estimate(timezone.now())  # expands every field: a bad one raises here
    except (ValueError, TypeError) as exc:
        raise InvalidSchedule(f"schedule {text!r}: {exc}") from exc
    return schedule


def is_due(policy: Any, now: dt.datetime) -> bool:
    """Whether the policy's crontab fell due since its last run (or since it was created)."""
    schedule = parse_schedule(policy.schedule)
    last = policy.last_run_at or policy.created_at
    schedule.nowfun = lambda: now
    return bool(schedule.is_due(last).is_due)
