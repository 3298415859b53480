"""Package exports imported on first use (PEP 562), so importing a package does not import LangGraph.

``deerflow.runtime``, ``deerflow.convert`` and ``deerflow.retention`` re-export names from their
submodules. Importing those submodules eagerly costs every process that touches the package about half
a second of LangGraph and langchain-core imports (measured: ``django.setup()`` 1.0 s eager, 0.28 s lazy,
2 cores), including a ``manage.py`` command that only reports a config.yaml error. With
:func:`lazy_exports` the package names the submodule of each export and imports it when the name is
first read; ``from deerflow.convert import convert_thread`` works as before.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str,
                 exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level ``__getattr__`` and ``__dir__`` for ``exports``.

    Args:
        package: the package's ``__name__`` (e.g. ``"deerflow.convert"``).
        exports: public name -> the submodule defining it, relative to ``package`` (e.g.
            ``{"convert_thread": "converter"}``).

    Returns:
        ``(__getattr__, __dir__)``. ``__getattr__(name)`` imports the submodule, caches the value in the
        package's namespace and returns it; it raises ``AttributeError`` (as Python does) for a name not in
        ``exports``, and lets an ``ImportError`` of the submodule propagate.
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        try:
            submodule = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f"{package}.{submodule}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
