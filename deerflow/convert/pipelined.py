"""Pipelined ``put`` s on Postgres, shared by the delta->full writer and the full->delta compactor.

A rewrite puts one checkpoint per row through LangGraph's ``PostgresSaver``,
whose ``put`` waits for the server after every call (one round trip per
checkpoint). :class:`PipelinedPuts` queues the puts in psycopg's pipeline mode
instead and waits every :data:`PipelinedPuts.DEPTH` checkpoints (or its ``depth``); the ``put``
itself stays LangGraph's. Nothing changes for the job's guarantees: the puts
run on the session's connection, in its one transaction, after the backup,
and every verification reads after :meth:`PipelinedPuts.pipelined` has synced.
SQLite puts go through the session's saver as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from deerflow.storage.sessions import ConversionSession

__all__ = ["PipelinedPuts"]


class _DeferredSync:
    """The ``pipe`` handed to the pipelined ``PostgresSaver``: its per-``put`` ``sync()`` does not wait
    (:meth:`PipelinedPuts.put` and :meth:`PipelinedPuts.pipelined` sync the real pipeline)."""

    def sync(self) -> None:
        """Nothing: :class:`PipelinedPuts` decides when to wait."""


class PipelinedPuts:
    """``saver.put`` for a rewrite, queued in a psycopg pipeline on Postgres inside :meth:`pipelined`.

    Args:
        session: the conversion's session (its connection, transaction and saver).
        serde: the serializer the pipelined saver writes with (default: the session saver's).
        depth: checkpoints queued before waiting for the server (count, >= 1; default :data:`DEPTH`). Each
            wait lets the server drain the queue while the client stands still; what is in flight at any time
            is bounded by the socket's buffers (psycopg sends a statement only when the socket can take it),
            not by the depth.

    Attributes:
        saver: the saver :meth:`put` uses: the session's, or its pipelined twin once :meth:`put`
            ran inside :meth:`pipelined` on Postgres.
        queued: puts sent through the pipeline so far (count).
    """

    #: Postgres: checkpoints queued in the pipeline before waiting for the server (count).
    DEPTH = 32

    def __init__(self, session: ConversionSession, serde: Any = None, *, depth: int | None = None):
        if depth is not None and depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.session = session
        self.depth = self.DEPTH if depth is None else depth
        self.serde = serde if serde is not None else session.saver.serde
        self.saver = session.saver
        self.queued = 0
        self._pipeline: Any = None
        self._stack: ExitStack | None = None

    @contextmanager
    def pipelined(self) -> Iterator[None]:
        """Allow pipelining for the block; on leaving it, wait for every queued statement.

        Pipeline mode starts at the first :meth:`put` inside the block (so
        statements run before it, e.g. the backup's, keep their row counts)
        and ends with the block. A failed statement raises at the next wait
        (inside the block or on leaving it), and the caller's session rolls the
        whole rewrite back. Outside the block, or on SQLite, :meth:`put` is the
        session saver's own.
        """
        with ExitStack() as stack:
            self._stack = stack
            try:
                yield
                if self._pipeline is not None:
                    self._pipeline.sync()
            finally:
                self.saver, self._pipeline, self._stack = self.session.saver, None, None

    def _start(self) -> None:
        if self._pipeline is None and self._stack is not None and self.session.dialect.pipelines:
            from langgraph.checkpoint.postgres import PostgresSaver

            self._pipeline = self._stack.enter_context(self.session.conn.pipeline())
            pipe: Any = _DeferredSync()  # stands in for psycopg's Pipeline: only its sync() is called
            self.saver = PostgresSaver(self.session.conn, pipe=pipe, serde=self.serde)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> None:
        """LangGraph's ``saver.put(config, checkpoint, metadata, new_versions)``, queued when pipelining.

        Raises:
            psycopg.Error: a queued statement failed (raised at a wait, possibly for an earlier put).
        """
        self._start()
        self.saver.put(config, checkpoint, metadata, new_versions)
        if self._pipeline is not None:
            self.queued += 1
            if self.queued % self.depth == 0:
                self._pipeline.sync()
