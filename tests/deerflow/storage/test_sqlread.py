"""SqlReader opens the saver's connection by its type, for every shape a saver's ``conn`` takes here.

A real ``SqliteSaver``, a real ``PostgresSaver`` on one ``psycopg.Connection``, one on a
``psycopg_pool.ConnectionPool`` (and on :class:`deerflow.storage.pool.FailFastConnectionPool`), and the
conversion session's saver (:func:`deerflow.storage.sessions.open_session`: one connection inside an
open transaction). Each shape runs the reads the reader's lineage and compare modules make through SqlReader
(branch points, the namespace's first id, a parent's children, the replay walk) on a small fork.

Every psycopg connection has a ``connection`` property (itself), so "has ``.connection``" never
told a pool from a connection: a Postgres saver on one connection failed with ``'Connection'
object is not callable``. Objects that only look like a pool are refused.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from deerflow.config.database_config import DatabaseConfig
from deerflow.reader.compare import _children
from deerflow.reader.lineage import _first_id, branch_points, replay_chain
from deerflow.storage.dialect import Dialect, postgres_connect_kwargs
from deerflow.storage.pool import FailFastConnectionPool
from deerflow.storage.sessions import open_session
from deerflow.storage.sqlread import SqlReader, has_sql_tables, postgres_connection, reader_for
from tests.backends import BACKENDS, fresh_database

THREAD = "sqlread-shapes"


def _put(saver: Any, parent: str | None, source: str) -> str:
    checkpoint = empty_checkpoint()
    configurable = {"thread_id": THREAD, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    saver.put({"configurable": configurable}, checkpoint, {"source": source, "step": 0}, {})
    return str(checkpoint["id"])


def _fork(saver: Any) -> tuple[str, str, str]:
    """A root with two children (a fork: the root is a branch point); returns ``(root, a, b)``."""
    root = _put(saver, None, "input")
    return root, _put(saver, root, "loop"), _put(saver, root, "loop")


def _assert_reads(saver: Any, root: str, a: str, b: str) -> None:
    """The reader's lineage/compare reads, all through SqlReader, see the fork."""
    reader = reader_for(saver)
    assert reader.query("SELECT COUNT(*) AS n FROM checkpoints WHERE thread_id = ?", [THREAD])[0]["n"] == 3
    assert branch_points(saver, THREAD, "") == frozenset({root})
    assert _first_id(saver, THREAD, "") == root
    assert _first_id(saver, THREAD, "elsewhere") is None
    assert sorted(_children(saver, THREAD, "", root)) == sorted([a, b])
    chain = replay_chain(saver, THREAD, "", a)
    assert chain.gap is None and chain.checkpoint_ids == (a, root)


# -- the shapes -------------------------------------------------------------------

def test_sqlite_saver(tmp_path: Path):
    from langgraph.checkpoint.sqlite import SqliteSaver

    with closing(sqlite3.connect(str(tmp_path / "deerflow.db"), check_same_thread=False)) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        assert Dialect.of_saver(saver) is Dialect.SQLITE
        _assert_reads(saver, *_fork(saver))
        with reader_for(saver).reading() as tx:
            assert tx.conn is conn and saver.lock.locked()


@pytest.mark.postgres
def test_postgres_saver_on_one_connection(empty_postgres_db: DatabaseConfig):
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(empty_postgres_db.postgres_url or "", autocommit=True, prepare_threshold=0,
                         row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        assert Dialect.of_saver(saver) is Dialect.POSTGRES
        _assert_reads(saver, *_fork(saver))
        reader = SqlReader(saver)
        with reader.reading() as tx:
            assert tx.conn is conn
            assert saver.lock.locked()  # one connection, one statement at a time (as the saver's _cursor())
        assert not saver.lock.locked()
        with reader.transaction() as tx:
            assert tx.query("SELECT 1 AS one")[0]["one"] == 1
        with reader.autocommit() as auto:
            assert auto is not None and auto.conn is conn


@pytest.mark.postgres
@pytest.mark.parametrize("pool_class", [ConnectionPool, FailFastConnectionPool])
def test_postgres_saver_on_a_pool(empty_postgres_db: DatabaseConfig, pool_class: type[ConnectionPool]):
    from langgraph.checkpoint.postgres import PostgresSaver

    with pool_class(empty_postgres_db.postgres_url or "", min_size=1, max_size=2, open=True,
                    kwargs=postgres_connect_kwargs(empty_postgres_db)) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        assert Dialect.of_saver(saver) is Dialect.POSTGRES
        _assert_reads(saver, *_fork(saver))
        with reader_for(saver).reading() as tx:
            assert isinstance(tx.conn, psycopg.Connection)
            assert not saver.lock.locked()  # each borrower has its own connection
            assert pool.get_stats().get("requests_num", 0) >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_conversion_sessions_connection(backend: str, tmp_path: Path):
    """SqlReader on the session's saver reads inside the session's open transaction (same connection)."""
    with fresh_database(backend, tmp_path, prefix="dfa_sqlread") as database:
        if backend == "postgres":  # the session does not run the Postgres saver's setup()
            from deerflow.storage.savers import open_checkpointer

            with open_checkpointer(database, create=True):
                pass
        with open_session(database) as session:
            root, a, b = _fork(session.saver)  # not committed
            assert isinstance(session.saver.conn, sqlite3.Connection | psycopg.Connection)
            _assert_reads(session.saver, root, a, b)
            with reader_for(session.saver).reading() as tx:
                assert tx.conn is session.conn
            session.rollback()
        with open_session(database, write=False) as session:
            assert branch_points(session.saver, THREAD, "") == frozenset()
            assert _first_id(session.saver, THREAD, "") is None


# -- what is refused --------------------------------------------------------------

class _LooksLikeAPool:
    """Has a callable ``connection()``, as a pool has, and is no pool."""

    def connection(self) -> Any:  # pragma: no cover - never called
        raise AssertionError("duck-typed as a pool")


class _Saver:
    def __init__(self, conn: Any):
        self.conn = conn


def test_a_conn_that_only_looks_like_a_pool_is_refused():
    with pytest.raises(TypeError, match="_LooksLikeAPool"):
        reader_for(_Saver(_LooksLikeAPool()))
    with pytest.raises(TypeError):
        Dialect.of_connection(object())


def test_a_saver_without_conn_has_no_sql_tables():
    assert not has_sql_tables(object())


def test_an_async_pool_is_postgres_but_cannot_be_read_synchronously():
    pool = AsyncConnectionPool("", open=False)
    assert Dialect.of_connection(pool) is Dialect.POSTGRES
    with pytest.raises(TypeError, match="AsyncConnectionPool"), postgres_connection(pool):
        pass  # pragma: no cover

