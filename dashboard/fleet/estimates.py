"""What compacting the legacy threads would free, as the fleet audit asks it: provided by the jobs app at start-up.

The jobs app measures compactions (its ``ThreadResult`` rows); the fleet audit
shows the estimate in its readiness checklist without importing the jobs app:
:class:`dashboard.jobs.apps.JobsConfig` installs :func:`dashboard.jobs.compaction.legacy_estimate`
here. Without a provider the checklist leaves the item out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dashboard.runtime import DashboardRuntime

__all__ = ["LegacyEstimate", "LegacyEstimator", "legacy_estimate", "provide_legacy_estimate"]


class LegacyEstimate(Protocol):
    """Bytes the legacy (full and migrated) threads hold and what compaction would free (see the provider)."""

    threads: int
    bytes_total: int
    measured_threads: int
    freed_ratio: float | None
    bytes_freed: int | None


#: ``(runtime, storage by class or None) -> LegacyEstimate``.
LegacyEstimator = Callable[["DashboardRuntime", "dict[str, dict[str, int]] | None"], LegacyEstimate]

_estimator: LegacyEstimator | None = None


def provide_legacy_estimate(estimator: LegacyEstimator) -> None:
    """Install the estimator (called once from an app's ``ready()``)."""
    global _estimator
    _estimator = estimator


def legacy_estimate(rt: DashboardRuntime, by_class: dict[str, dict[str, int]] | None) -> LegacyEstimate | None:
    """The installed estimator's answer, or ``None`` when no app provides one."""
    return _estimator(rt, by_class) if _estimator is not None else None
