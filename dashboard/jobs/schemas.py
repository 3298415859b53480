"""The ``POST /api/jobs`` body, field by field: its pydantic schema and the check the API calls.

:func:`check_job_body` runs on the parsed JSON object before the job form
sees it, so every field has its JSON type (strict: ``"5"`` is no number,
``1`` no boolean, ``12`` no string), its range (64-bit ids and byte counts,
finite numbers) and, for text, the character set of
:data:`dashboard.jsonbody.Text`. Rules that need the database or the kind's
semantics (which filter keys a kind takes, a rule's ``keep_last``, how many
ids one request may list, whether the threads exist) stay with the form,
:mod:`dashboard.jobs.selection` and :func:`dashboard.jobs.pruning.normalize_retention`,
which keep their own error codes; a field of a selection that fails here is
``invalid_selection``, of a prune rule ``invalid_retention``, anything else
``invalid_parameters``.

``null``: the selection fields (``thread_ids``, ``filter``, ``backup_ids``) take ``null`` for "not this
one" (a body names one of them), and a filter's criteria take ``null`` or ``""`` for a criterion not used.
Every other field is given or left out: an explicit ``null`` is refused, naming the field and what to send
(``"integrity": null`` is neither true nor false; leaving the field out takes its default).
"""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
from pydantic import Field, StringConstraints

from dashboard.jobs.models import ConversionJob
from dashboard.jobs.pruning import MAX_KEEP_LAST, MAX_PROTECT
from dashboard.jsonbody import MAX_STORED_INT, TEXT, Flag, Text, strict_model_config, validate_body
from deerflow.inventory.deerflow_tables import MAX_OWNER_LENGTH

__all__ = ["MAX_QUERY_LENGTH", "JobBody", "JobFilter", "check_job_body"]

#: Characters of ``filter.q`` (the thread list's "id contains").
MAX_QUERY_LENGTH = 2000
#: Characters of a filter's ``updated_before``/``updated_after`` (an ISO 8601 date-time is at most ~35).
MAX_INSTANT_LENGTH = 64
#: Characters of a checkpoint id in ``protect`` (as :func:`dashboard.jobs.pruning.normalize_retention` bounds it).
MAX_CHECKPOINT_ID_LENGTH = 200

_KINDS = tuple(ConversionJob.Kind.values)
_SELECTION_FIELDS = ("thread_ids", "filter", "backup_ids")
_RETENTION_FIELDS = ("rule", "keep_last", "protect", "backup", "max_delete_per_run")


def _given(what: str) -> pydantic.BeforeValidator:
    """The check of an option that may be left out but not sent as ``null``: the 400 says to send ``what``."""

    def refuse_null(value: Any, info: pydantic.ValidationInfo) -> Any:
        if value is None:
            raise ValueError(f"is null; send {what}, or leave {info.field_name} out for its default")
        return value

    return pydantic.BeforeValidator(refuse_null)


#: Options that are left out rather than sent as ``null`` (see the module docstring), by what they hold.
GIVEN_FLAG, GIVEN_NUMBER = _given("true or false"), _given("a number")
GIVEN_TEXT, GIVEN_LIST = _given("a string"), _given("a list")


def _known_kind(value: str) -> str:
    if value not in _KINDS:
        raise ValueError(f"must be one of {', '.join(_KINDS)}")
    return value


#: A non-empty id (thread or backup); how many and how long are bounded by :mod:`dashboard.jobs.selection`.
Identifier = Annotated[str, StringConstraints(min_length=1), TEXT]
#: A whole number a store holds in a 64-bit id or size column, at least 1.
StoredCount = Annotated[int, Field(ge=1, le=MAX_STORED_INT)]


class JobFilter(pydantic.BaseModel):
    """``filter``: the thread list's filter (``null`` or ``""`` for a criterion not used)."""

    model_config = strict_model_config()

    mode: Text | None = None
    """``full``, ``delta`` (or ``any`` for prune kinds): checked by :mod:`dashboard.jobs.selection`."""
    thread_class: Text | None = None
    """One of :data:`deerflow.inventory.LIST_CLASSES` (``orphaned`` included): checked by
    :mod:`dashboard.jobs.selection`."""
    owner: Annotated[str, StringConstraints(max_length=MAX_OWNER_LENGTH), TEXT] | None = None
    """DeerFlow's ``threads_meta.user_id``, exactly (checked again by :mod:`dashboard.jobs.selection`)."""
    q: Annotated[str, StringConstraints(max_length=MAX_QUERY_LENGTH), TEXT] | None = None
    """Thread id contains this (ignoring case)."""
    updated_before: Annotated[str, StringConstraints(max_length=MAX_INSTANT_LENGTH), TEXT] | None = None
    """ISO 8601 date-time (parsed by :mod:`dashboard.jobs.selection`)."""
    updated_after: Annotated[str, StringConstraints(max_length=MAX_INSTANT_LENGTH), TEXT] | None = None
    """ISO 8601 date-time (parsed by :mod:`dashboard.jobs.selection`)."""
    idle_days: Annotated[float, Field(ge=0)] | None = None
    """Prune kinds: days since the thread's newest checkpoint (a finite JSON number; a span past year one
    selects nothing; an integer too large for a float is refused)."""


class JobBody(pydantic.BaseModel):
    """The ``POST /api/jobs`` body (docs/api.md lists what each field means). ``None`` is a field left out; only
    the selection fields accept an explicit ``null`` (see the module docstring)."""

    model_config = strict_model_config()

    kind: Annotated[Text, pydantic.AfterValidator(_known_kind)]
    thread_ids: list[Identifier] | None = None
    filter: JobFilter | None = None
    backup_ids: list[Identifier] | None = None
    estimate_job: Annotated[StoredCount | None, GIVEN_NUMBER] = None
    confirmed: Annotated[Flag | None, GIVEN_FLAG] = None
    throttle_delay_s: Annotated[Annotated[float, Field(ge=0, le=3600)] | None, GIVEN_NUMBER] = None
    max_in_flight: Annotated[Annotated[int, Field(ge=1, le=32)] | None, GIVEN_NUMBER] = None
    integrity: Annotated[Flag | None, GIVEN_FLAG] = None
    size_limit_bytes: Annotated[StoredCount | None, GIVEN_NUMBER] = None
    force_full_fleet: Annotated[Flag | None, GIVEN_FLAG] = None
    acknowledge_branch_ambiguous: Annotated[Flag | None, GIVEN_FLAG] = None
    rule: Annotated[Text | None, GIVEN_TEXT] = None
    keep_last: Annotated[Annotated[int, Field(ge=1, le=MAX_KEEP_LAST)] | None, GIVEN_NUMBER] = None
    protect: Annotated[Annotated[list[Annotated[str, StringConstraints(min_length=1,
                                                                       max_length=MAX_CHECKPOINT_ID_LENGTH), TEXT]],
                                 Field(max_length=MAX_PROTECT)] | None, GIVEN_LIST] = None
    backup: Annotated[Flag | None, GIVEN_FLAG] = None
    max_delete_per_run: Annotated[Annotated[int, Field(ge=0, le=MAX_STORED_INT)] | None, GIVEN_NUMBER] = None
    """Prune kinds: the most threads one run prunes or deletes (0: none this run; left out: no cap)."""
    dry_run: Annotated[Flag | None, GIVEN_FLAG] = None
    confirm: Annotated[Flag | None, GIVEN_FLAG] = None
    """Reclaim: ``true``, the page's confirmation."""
    full: Annotated[Flag | None, GIVEN_FLAG] = None
    """Reclaim: ``VACUUM FULL`` on Postgres."""
    source_job: Annotated[StoredCount | None, GIVEN_NUMBER] = None
    """Reclaim: the job whose freed rows it gives back."""


def _code_for(field: str) -> str:
    if field in _SELECTION_FIELDS:
        return "invalid_selection"
    if field in _RETENTION_FIELDS:
        return "invalid_retention"
    return "invalid_parameters"


def check_job_body(body: dict[str, Any], *, hint: str) -> dict[str, Any]:
    """``body`` (the parsed JSON object of ``POST /api/jobs``) once every field is what :class:`JobBody` says.

    Args:
        body: the parsed JSON object.
        hint: what a job body holds (said with the 400).

    Returns:
        ``body`` itself (validation is strict, so nothing was coerced).

    Raises:
        dashboard.jsonbody.BodyRefused: 400 ``invalid_selection`` (a field of the selection),
            ``invalid_retention`` (a field of a prune rule) or ``invalid_parameters``, naming every bad field.
    """
    validate_body(JobBody, body, what="job", hint=hint, code_for=_code_for)
    return body
