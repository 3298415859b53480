"""One registry mapping domain errors to HTTP status, detail and remediation hint.

Both the HTML views and the JSON API render errors through :func:`describe`,
so an operator sees the same words everywhere (spec, "HTTP error mapping":
409 for a mode mismatch, operator-actionable; 503 for a reconfiguration,
transient until restart). :data:`CODES` holds every code whose status and
hint do not depend on the error (:func:`view` builds its answer); codes
with hints made from the error (a reconfiguration, an outage, a 405) are
built where they are raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from dashboard.errors.outages import OUTAGES, describe_outage
from deerflow.errors import (
    BranchAmbiguousError,
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

__all__ = ["CODES", "HANDLED", "OUTAGES", "Code", "ErrorView", "describe", "form_errors", "invalid_parameters",
           "view"]


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


class Code(NamedTuple):
    """A registered error code: its HTTP status and what the user should do."""

    status: int
    hint: str


#: The codes with a fixed status and hint, by code.
CODES: dict[str, Code] = {
    "checkpoint_mode_mismatch": Code(409, (
        "This dashboard process runs in full mode, and this thread was written in delta mode. "
        "Convert the thread to full mode with a materialize-and-convert job (\"Convert to full…\": a dry run, "
        "then the conversion; the dashboard's workers run it, they read delta threads whatever config.yaml's "
        "mode), or run every process of the fleet in delta mode, with one config.yaml.")),
    "thread_not_found": Code(404, "Check the thread id; the list shows every thread in the configured database."),
    "checkpoint_not_found": Code(404, "Check checkpoint_id and checkpoint_ns against the thread's history."),
    "checkpoint_undecodable": Code(422, (
        "The row is damaged in the database; nothing was changed. Restore it from a database "
        "backup. Checkpoints that do not depend on it still open from the thread's history.")),
    "history_incomplete": Code(422, (
        "A delta checkpoint replays its ancestors back to the last snapshot; with a link missing, "
        "the messages after the break would show as if they were the whole conversation, so none "
        "are shown. Nothing was changed. Restore the missing rows from a database backup; the "
        "history marks every checkpoint that cannot be reconstructed.")),
    "reducer_error": Code(422, (
        "A stored messages write cannot be applied to the list it follows, so this checkpoint's "
        "messages cannot be shown; nothing was changed. The checkpoints before that write read "
        "normally (see the history). A conversion reports the same write as its reducer_error "
        "finding; restore the thread from a database backup to read past it.")),
    "branch_ambiguous": Code(422, (
        "Sibling forks left by an older LangGraph release store all their messages writes under the "
        "branch point, and nothing stored says which child consumed which write; LangGraph's reader "
        "would show both branches' messages mixed, so none are shown. Nothing was changed. The "
        "checkpoints up to the branch point read normally (see the history). A conversion refuses "
        "the thread unless the operator acknowledges it (convert_threads --acknowledge-branch-ambiguous).")),
    "invalid_cursor": Code(400, "Drop the cursor parameter to start from the first page."),
    "config_error": Code(503, "Fix config.yaml and restart the process."),
    "job_not_found": Code(404, (
        "Open the job from the Jobs page, which lists every job; check the number in the address.")),
    "permission_denied": Code(403, "Ask an administrator for the permission, or log in as another user."),
    "server_error": Code(500, (
        "This is a bug, not something you did: retry, and if it persists report the time and the address; "
        "the traceback is in the server log.")),
}


def view(code: str, detail: str) -> ErrorView:
    """The :class:`ErrorView` of a registered ``code`` (:data:`CODES`) with ``detail``.

    Raises:
        KeyError: ``code`` is not registered.
    """
    registered = CODES[code]
    return ErrorView(registered.status, code, detail, registered.hint)


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
        return view("checkpoint_mode_mismatch", exc.detail)
    if isinstance(exc, CheckpointModeReconfigurationError):
        return _reconfiguration(exc)
    for cls, code in _BY_CLASS:
        if isinstance(exc, cls):
            return view(code, str(exc))
    outage = describe_outage(exc)  # a database or the broker cannot be reached (dashboard.errors.outages)
    if outage is not None:
        return ErrorView(503, *outage)
    raise TypeError(f"unhandled error type {type(exc).__name__}")


#: Handled errors answered with their registered code and ``str(error)`` as the detail (first match wins).
_BY_CLASS: tuple[tuple[type[Exception], str], ...] = (
    (ThreadNotFoundError, "thread_not_found"),
    (CheckpointNotFoundError, "checkpoint_not_found"),
    (CheckpointDecodeError, "checkpoint_undecodable"),
    (IncompleteHistoryError, "history_incomplete"),
    (ReducerError, "reducer_error"),
    (BranchAmbiguousError, "branch_ambiguous"),
    (InvalidCursorError, "invalid_cursor"),
    (ConfigError, "config_error"),
)

HANDLED = (
    CheckpointModeMismatchError,
    CheckpointModeReconfigurationError,
    ThreadNotFoundError,
    CheckpointNotFoundError,
    CheckpointDecodeError,
    IncompleteHistoryError,
    ReducerError,
    BranchAmbiguousError,
    InvalidCursorError,
    ConfigError,
)
