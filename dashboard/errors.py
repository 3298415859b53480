"""One registry mapping domain errors to HTTP status, detail and remediation hint.

Both the HTML views and the JSON API render errors through :func:`describe`,
so an operator sees the same words everywhere (spec, "HTTP error mapping":
409 for a mode mismatch, operator-actionable; 503 for a reconfiguration,
transient until restart).
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.outages import OUTAGES, describe_outage
from deerflow.errors import (
    CheckpointDecodeError,
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
    CheckpointNotFoundError,
    ConfigError,
    IncompleteHistoryError,
    ReducerError,
    ThreadNotFoundError,
)
from deerflow.inventory import InvalidCursorError

__all__ = ["ErrorView", "HANDLED", "OUTAGES", "describe", "invalid_parameters"]


@dataclass(frozen=True)
class ErrorView:
    """What a page or API response says about an error."""

    status: int
    code: str
    detail: str
    hint: str

    def as_json(self) -> dict[str, str]:
        """The API's error body: ``{"detail", "hint", "code"}``."""
        return {"detail": self.detail, "hint": self.hint, "code": self.code}


def invalid_parameters(form, *, what: str = "query parameters",
                       hint: str = "Fix or drop the listed parameters.") -> ErrorView:
    """The 400 ``invalid_parameters`` answer for a Django form that did not validate.

    Args:
        form: a bound form whose ``is_valid()`` returned ``False``.
        what: what was submitted, for the detail (``"Invalid <what>: field: message; ..."``).
        hint: what the user should do.
    """
    return ErrorView(400, "invalid_parameters", f"Invalid {what}: {form_errors(form)}", hint)


def form_errors(form) -> str:
    """All of a form's errors as one line: ``field: message; ...``."""
    return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())


def _mismatch(exc: CheckpointModeMismatchError) -> ErrorView:
    return ErrorView(
        status=409,
        code="checkpoint_mode_mismatch",
        detail=exc.detail,
        hint=(
            "This dashboard process runs in full mode, and this thread was written in delta mode. "
            "Open it from a delta-mode dashboard (database.checkpoint_channel_mode: delta), or convert "
            "the thread to full mode with a materialize-and-convert job before serving it in full mode."
        ),
    )


def _reconfiguration(exc: CheckpointModeReconfigurationError) -> ErrorView:
    if exc.frozen is not None and exc.requested is not None:
        # In a running dashboard or worker the only source of a different value
        # is config.yaml edited on disk (the runtime's drift check); the API
        # accepts no caller-supplied mode.
        hint = (
            f"{exc.setting} is frozen at {exc.frozen!r} in this process, but the value on disk in "
            f"config.yaml is now {exc.requested!r}. Restart this process so it freezes the new value, "
            "and restart every other process sharing the checkpoint database with it "
            "(identical config.yaml files are a deployment requirement)."
        )
    else:
        hint = "Restart this process so it freezes the value in config.yaml."
    return ErrorView(status=503, code="checkpoint_mode_reconfiguration", detail=exc.detail, hint=hint)


def describe(exc: Exception) -> ErrorView:
    """The status, detail and hint for a handled error (:data:`HANDLED`) or an outage (:data:`OUTAGES`).

    Raises:
        TypeError: ``exc`` is neither.
    """
    if isinstance(exc, CheckpointModeMismatchError):
        return _mismatch(exc)
    if isinstance(exc, CheckpointModeReconfigurationError):
        return _reconfiguration(exc)
    if isinstance(exc, ThreadNotFoundError):
        return ErrorView(404, "thread_not_found", str(exc),
                         "Check the thread id; the list shows every thread in the configured database.")
    if isinstance(exc, CheckpointNotFoundError):
        return ErrorView(404, "checkpoint_not_found", str(exc),
                         "Check checkpoint_id and checkpoint_ns against the thread's history.")
    if isinstance(exc, CheckpointDecodeError):
        return ErrorView(422, "checkpoint_undecodable", str(exc),
                         "The row is damaged in the database; nothing was changed. Restore it from a database "
                         "backup. Checkpoints that do not depend on it still open from the thread's history.")
    if isinstance(exc, IncompleteHistoryError):
        return ErrorView(422, "history_incomplete", str(exc),
                         "A delta checkpoint replays its ancestors back to the last snapshot; with a link missing, "
                         "the messages after the break would show as if they were the whole conversation, so none "
                         "are shown. Nothing was changed. Restore the missing rows from a database backup; the "
                         "history marks every checkpoint that cannot be reconstructed.")
    if isinstance(exc, ReducerError):
        return ErrorView(422, "reducer_error", str(exc),
                         "A stored messages write cannot be applied to the list it follows, so this checkpoint's "
                         "messages cannot be shown; nothing was changed. The checkpoints before that write read "
                         "normally (see the history). A conversion reports the same write as its reducer_error "
                         "finding; restore the thread from a database backup to read past it.")
    if isinstance(exc, InvalidCursorError):
        return ErrorView(400, "invalid_cursor", str(exc), "Drop the cursor parameter to start from the first page.")
    if isinstance(exc, ConfigError):
        return ErrorView(503, "config_error", str(exc), "Fix config.yaml and restart the process.")
    outage = describe_outage(exc)  # a database or the broker cannot be reached (dashboard.outages)
    if outage is not None:
        return ErrorView(503, *outage)
    raise TypeError(f"unhandled error type {type(exc).__name__}")


HANDLED = (
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
    ThreadNotFoundError,
    CheckpointNotFoundError,
    CheckpointDecodeError,
    IncompleteHistoryError,
    ReducerError,
    InvalidCursorError,
    ConfigError,
)
