"""DeerFlow checkpoint channel-mode runtime, importable without Django.

Implements the contract in ``docs/channel-modes.md`` at DeerFlow's module paths
(:mod:`deerflow.agents.thread_state`, :mod:`deerflow.runtime.checkpoint_mode`,
:mod:`deerflow.runtime.checkpoint_state`, :mod:`deerflow.config`) and, beside it,
one package per concern, each with one public face (its ``__all__``):

* :mod:`deerflow.storage` -- open, address and query the checkpoint database (SQLite, Postgres);
* :mod:`deerflow.reader` -- read a stored thread, with every gate and gap rule;
* :mod:`deerflow.inventory` -- what is stored, from metadata only (list, census, summary);
* :mod:`deerflow.convert`, :mod:`deerflow.retention` -- the rewrites of stored threads;
* :mod:`deerflow.seed` -- scale data written as LangGraph writes it;
* :mod:`deerflow.errors` -- the :class:`~deerflow.errors.DeerFlowError` tree.

The package itself exports nothing: import from the package that owns a name.
"""
