"""Thread browsing services shared by the HTML views and the JSON API.

Each read checks config drift first (503), then reads through
:class:`deerflow.reader.ThreadReader` (every gate and gap rule: the full-mode
lineage gate's 409, the replay-gap 422, the replay rule) or
:mod:`deerflow.inventory.listing` (metadata only). What stays here is the
dashboard's own upkeep: a thread found gone leaves the summary table
(:func:`dashboard.threads.storage.forget_vanished`), and the summary cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from dashboard.runtime import DashboardRuntime
from dashboard.threads import storage
from deerflow import inventory
from deerflow.errors import ThreadNotFoundError
from deerflow.inventory import deerflow_tables
from deerflow.reader import CheckpointRow, StateView, ThreadReader, messages_stored, pending_nodes
from deerflow.reader import unknown_channels as _unknown_channels
from deerflow.runtime.checkpoint_mode import (
    CHECKPOINT_MODE_DELTA,
    CHECKPOINT_MODE_METADATA_KEY,
    COUNTERS_METADATA_KEY,
)
from deerflow.storage import has_sql_tables, reader_for

__all__ = [
    "CheckpointRow",
    "StateView",
    "deerflow_facts",
    "deerflow_tables_present",
    "state_answer",
    "list_threads",
    "messages_stored",
    "pending_nodes",
    "read_history",
    "read_state",
    "reader",
    "thread_summary",
    "unknown_channels",
]


def reader(rt: DashboardRuntime) -> ThreadReader:
    """The :class:`ThreadReader` of the process's saver, accessor, frozen mode and cadence (opens the saver).

    A request builds one and hands it to every read it makes (the ``thread_reader`` argument of the
    reads below); a read called without one builds its own.
    """
    return ThreadReader(rt.saver, rt.accessor, rt.mode, rt.snapshot_frequency)


def _reader(rt: DashboardRuntime, thread_reader: ThreadReader | None) -> ThreadReader:
    return thread_reader if thread_reader is not None else reader(rt)


@contextmanager
def _forgetting_vanished(rt: DashboardRuntime, thread_id: str) -> Iterator[None]:
    """A thread found without checkpoints (404) leaves the summary table too, so the list stops showing it."""
    try:
        yield
    except ThreadNotFoundError:
        storage.forget_vanished(rt, thread_id)
        raise


def unknown_channels(rt: DashboardRuntime, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Undeclared stored channels, as stored (:func:`deerflow.reader.views.unknown_channels`)."""
    return _unknown_channels(rt.mode, rt.snapshot_frequency, checkpoint)


def _thread_exists(rt: DashboardRuntime, thread_id: str) -> bool:
    return reader(rt).thread_exists(thread_id)


def read_state(rt: DashboardRuntime, thread_id: str, checkpoint_id: str | None = None,
               checkpoint_ns: str = "", *, thread_reader: ThreadReader | None = None) -> StateView:
    """Materialize one checkpoint (the namespace head when ``checkpoint_id`` is None): :meth:`ThreadReader.read_state`.

    Args:
        thread_reader: the request's reader (:func:`reader`); ``None`` builds one.

    Raises:
        CheckpointModeReconfigurationError: config.yaml drifted (503).
        The errors of :meth:`deerflow.reader.ThreadReader.read_state` (404, 409, 422).
    """
    rt.check_drift()
    with _forgetting_vanished(rt, thread_id):
        return _reader(rt, thread_reader).read_state(thread_id, checkpoint_id, checkpoint_ns)


def read_history(
    rt: DashboardRuntime,
    thread_id: str,
    *,
    limit: int = 50,
    before: str | None = None,
    checkpoint_ns: str = "",
    thread_reader: ThreadReader | None = None,
) -> tuple[list[CheckpointRow], str | None]:
    """One page of a namespace's checkpoints, newest first: :meth:`ThreadReader.read_history`.

    Args:
        limit: rows per page (count, 1..500).
        before: a checkpoint id; the page starts just below it.
        thread_reader: the request's reader (:func:`reader`); ``None`` builds one.

    Returns:
        ``(rows, next_before)``; ``next_before`` is ``None`` on the last page.

    Raises:
        CheckpointModeReconfigurationError: config.yaml drifted (503).
        The errors of :meth:`deerflow.reader.ThreadReader.read_history`.
    """
    rt.check_drift()
    with _forgetting_vanished(rt, thread_id):
        return _reader(rt, thread_reader).read_history(
            thread_id, limit=limit, before=before, checkpoint_ns=checkpoint_ns)


def thread_namespaces(rt: DashboardRuntime, thread_id: str, *,
                      thread_reader: ThreadReader | None = None) -> list[inventory.Namespace]:
    """The thread's checkpoint namespaces, root first (:meth:`ThreadReader.namespaces`).

    Args:
        thread_reader: the request's reader (:func:`reader`); ``None`` builds one.

    Returns:
        The namespaces; ``[]`` on a saver without SQL tables (``InMemorySaver``).

    Raises:
        ThreadNotFoundError: the thread has no checkpoints.
    """
    with _forgetting_vanished(rt, thread_id):
        return _reader(rt, thread_reader).namespaces(thread_id)


def page_namespaces(rt: DashboardRuntime, thread_id: str, *,
                    thread_reader: ThreadReader | None = None) -> list[inventory.Namespace]:
    """The thread page's namespaces table: every namespace if the thread has a subgraph's, else ``[]``.

    The page shows the table only beside a subgraph namespace, and most threads have none: for them one
    key probe (:meth:`ThreadReader.has_subgraphs`) stands in for reading every checkpoint row
    (a fraction of a millisecond where reading every row takes a visible share of the page).

    Args:
        thread_reader: the request's reader (:func:`reader`); ``None`` builds one.

    Raises:
        ThreadNotFoundError: the thread lost its checkpoints between the probe and the read.
    """
    with _forgetting_vanished(rt, thread_id):
        thread_reader = _reader(rt, thread_reader)
        return thread_reader.namespaces(thread_id) if thread_reader.has_subgraphs(thread_id) else []


def list_threads(rt: DashboardRuntime, **filters: Any) -> tuple[list[inventory.ThreadSummary], str | None]:
    """A page of the thread inventory (see :func:`deerflow.inventory.list_threads`; orphans idle
    ``DASHBOARD_ORPHAN_MIN_IDLE_S`` seconds)."""
    return inventory.list_threads(rt.saver, orphan_min_idle_s=settings.DASHBOARD_ORPHAN_MIN_IDLE_S, **filters)


def seconds_words(seconds: float) -> str:
    """A span in the largest whole unit that fits: ``86400`` -> ``"1 day"``, ``5400`` -> ``"90 minutes"``."""
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n:,} {unit}{'' if n == 1 else 's'}"
    n = int(seconds)
    return f"{n:,} second{'' if n == 1 else 's'}"


def state_answer(rt: DashboardRuntime, view: StateView) -> dict[str, Any]:
    """The thread JSON of a materialized checkpoint (``GET /api/threads/<id>/state`` and the page's raw JSON):
    :func:`dashboard.threads.jsonify.state_json` plus DeerFlow's ``title``, ``owner`` and ``deerflow_thread``."""
    from dashboard.threads.jsonify import state_json

    return {**state_json(view), **deerflow_facts(rt, view.thread_id, with_runs=False).as_json()}


def deerflow_tables_present(rt: DashboardRuntime) -> bool:
    """True when the checkpoint database holds DeerFlow's ``threads_meta`` (titles, owners, orphans)."""
    return has_sql_tables(rt.saver) and deerflow_tables.presence(reader_for(rt.saver)).has_threads_meta


def deerflow_facts(rt: DashboardRuntime, thread_id: str, *, with_runs: bool = True) -> deerflow_tables.ThreadFacts:
    """What DeerFlow's own tables say about the thread: title, owner, status, runs
    (:func:`deerflow.inventory.deerflow_tables.thread_facts`); nothing on a saver without SQL tables."""
    if not has_sql_tables(rt.saver):
        return deerflow_tables.ThreadFacts(deerflow_tables.ABSENT)
    return deerflow_tables.thread_facts(reader_for(rt.saver), thread_id, with_runs=with_runs)


def thread_summary(rt: DashboardRuntime, thread_id: str, *, head: StateView | None = None) -> inventory.ThreadSummary:
    """The inventory row of one thread: the summary's row while it still describes the head, else
    computed now from the thread's own rows (and the summary's copy healed).

    Args:
        head: the root-namespace head just materialized (``read_state`` without a
            checkpoint id), if the caller has it: a row already shown for that very
            head (same id, same marker and counters on it) is answered from memory.

    Raises:
        ThreadNotFoundError: the thread has no checkpoints.
    """
    facts = None
    if head is not None and head.checkpoint_ns == "":
        counters = head.metadata.get(COUNTERS_METADATA_KEY)
        facts = (head.checkpoint_id, head.metadata.get(CHECKPOINT_MODE_METADATA_KEY) == CHECKPOINT_MODE_DELTA,
                 isinstance(counters, dict) and "messages" in counters)
        if (cached := storage.summary_cache.get(rt, thread_id, *facts)) is not None:
            return cached
    summary = inventory.current_summary(rt.saver, thread_id) if has_sql_tables(rt.saver) else None
    if summary is None:
        summary = inventory.get_thread_summary(rt.saver, thread_id)
        if summary is None:
            storage.forget_vanished(rt, thread_id)
            raise ThreadNotFoundError(thread_id)
        storage.heal_summary(rt, summary)
    storage.summary_cache.put(rt, summary)
    return summary


def thread_summary_or_none(rt: DashboardRuntime, thread_id: str) -> inventory.ThreadSummary | None:
    """:func:`thread_summary`, or ``None`` when it cannot be read (for error pages)."""
    from dashboard.errors import HANDLED

    try:
        return thread_summary(rt, thread_id)
    except HANDLED:
        return None


def exact_summary_or_none(rt: DashboardRuntime, thread_id: str) -> inventory.ThreadSummary | None:
    """The thread's row computed now from its own rows (the summary's copy healed when it differs), or ``None``
    when the thread has no checkpoints or cannot be read.

    For pages that show a thread's size right after a rewrite that keeps its head (a prune deletes older
    checkpoints under the same head id, so :func:`thread_summary` would still answer the stored, stale row):
    the revert and purge confirmations. One indexed aggregate of the thread's rows.
    """
    from dashboard.errors import HANDLED

    if not has_sql_tables(rt.saver):
        return thread_summary_or_none(rt, thread_id)
    try:
        live = inventory.get_thread_summary(rt.saver, thread_id)
        if live is not None:
            storage.heal_summary(rt, live)
        return live
    except HANDLED:
        return None


def head_digest(rt: DashboardRuntime, thread_id: str, checkpoint_ns: str = "") -> dict[str, Any]:
    """Materialize the head and describe it: ids, message count, canonical digest, and who read it.

    Returns:
        ``{"thread_id", "checkpoint_id", "message_count", "messages_sha256",
        "mode", "snapshot_frequency", "host", "pid"}``, or on a handled error
        ``{"thread_id", "error", "detail", "hint", "status", "mode", ...}``.
    """
    import os
    import socket

    from dashboard.errors import HANDLED, describe
    from deerflow.convert import messages_sha256

    who = {"thread_id": thread_id, "mode": rt.mode, "snapshot_frequency": rt.snapshot_frequency,
           "host": socket.gethostname(), "pid": os.getpid()}
    try:
        view = read_state(rt, thread_id, None, checkpoint_ns)
    except HANDLED as exc:
        err = describe(exc)
        return {**who, "error": err.code, "detail": err.detail, "hint": err.hint, "status": err.status}
    messages = view.values.get("messages") or []
    return {**who, "checkpoint_id": view.checkpoint_id, "message_count": len(messages),
            "messages_sha256": messages_sha256(messages)}


def thread_cadence(rt: DashboardRuntime, thread_id: str, *,
                   summary: inventory.ThreadSummary | None = None) -> Any:
    """The snapshot cadences that wrote the thread, inferred from metadata.

    Args:
        summary: the thread's row as the page shows it (:func:`thread_summary`), if the caller has it:
            a row that counts no checkpoint with LangGraph's counters has no cadence to infer (no query).

    Returns:
        A :class:`deerflow.inventory.census.CadenceInference` (``exact`` cadences proven by
        snapshots, else a ``lower_bound``), or ``None`` for a thread without
        delta counters or on a saver without SQL tables.
    """
    from deerflow.inventory import infer_cadences

    if not has_sql_tables(rt.saver) or (summary is not None and summary.counters_count == 0):
        return None
    return infer_cadences(rt.saver, [thread_id], use_summary=False).get(thread_id)


def count_threads(rt: DashboardRuntime, *, mode: str | None = None, thread_class: str | None = None,
                  q: str | None = None, owner: str | None = None, **_page: Any) -> int | None:
    """How many threads the list's filters match (:func:`deerflow.inventory.count_threads`);
    ``None`` on a saver without SQL tables. Paging and sort arguments are accepted and ignored."""
    from deerflow.inventory import count_threads as count

    if not has_sql_tables(rt.saver):
        return None
    return count(rt.saver, mode=mode, thread_class=thread_class, q=q, owner=owner,
                 orphan_min_idle_s=settings.DASHBOARD_ORPHAN_MIN_IDLE_S)
