"""Every error the dashboard answers, in one package: what it is called, how it is shown, who catches it.

Modules (one job each):

``registry``
    :class:`ErrorView` (status, code, detail, hint) and :func:`describe`, which maps every
    ``deerflow`` error the dashboard handles (:data:`HANDLED`) and every outage to its view;
    the hint texts live with their codes there (and in ``jobs`` for the job errors).
``outages``
    which database and broker errors are outages (503) and their words (:func:`describe_outage`,
    :func:`is_outage`); a SQL bug is not one.
``rendering``
    how a view is answered: JSON ``{"detail", "hint", "code"}`` under ``/api/``, the error page elsewhere.
``middleware``
    :class:`OutageMiddleware`, :class:`DamagedCheckpointMiddleware`, :class:`MethodNotAllowedMiddleware`.
``handlers``
    Django's ``handler400/403/404/500`` and ``CSRF_FAILURE_VIEW``.
``jobs``
    the job errors (:class:`JobError` tree, :class:`TransientDatabaseError`) and the jobs app's hints.
"""

from __future__ import annotations

from dashboard.errors.outages import OUTAGES, describe_outage, is_outage, is_sqlite_outage, redact
from dashboard.errors.registry import (
    CODES,
    HANDLED,
    Code,
    ErrorView,
    describe,
    form_errors,
    invalid_parameters,
    view,
)
from dashboard.errors.rendering import RETRY_AFTER_S, error_answer, error_page, json_error

__all__ = [
    "CODES",
    "HANDLED",
    "OUTAGES",
    "RETRY_AFTER_S",
    "Code",
    "ErrorView",
    "describe",
    "describe_outage",
    "error_answer",
    "error_page",
    "form_errors",
    "invalid_parameters",
    "is_outage",
    "is_sqlite_outage",
    "json_error",
    "redact",
    "view",
]

