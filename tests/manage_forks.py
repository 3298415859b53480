"""``python manage.py <args>`` in a fresh process forked from an interpreter with the libraries imported.

A ``manage.py`` process spends about a second importing LangGraph, langchain-core, Celery and
psycopg before it reads config.yaml (1.4 s of CPU per run on the 2-core CI machine, measured).
Tests that run a command a hundred times to see how it reports an error
(``tests/hardening/test_command_errors.py``) pay that a hundred times for nothing they check.

:func:`run_manage` runs ``manage.py`` as a script (``runpy``, ``__name__ == "__main__"``: the same
``main()``) in a child of :mod:`multiprocessing`'s fork server, whose process imported the modules of
:data:`PRELOAD` once and nothing of this project or of Django's settings. The child gets the given
environment (replacing, not extending, the inherited one), working directory and ``argv``, writes to
its own stdout and stderr files, and exits with the command's status: a fresh process in every way a
command can observe, except that third-party imports are already done.
"""

from __future__ import annotations

import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

#: Imported once by the fork server (third-party only: nothing reads Django settings or config.yaml).
PRELOAD = ["langgraph.graph", "langgraph.checkpoint.postgres", "langgraph.checkpoint.sqlite",
           "langchain_core.messages", "psycopg", "psycopg_pool", "redis", "kombu", "celery", "pydantic",
           "yaml", "django.db.models"]

_context: multiprocessing.context.ForkServerContext | None = None


def _forkserver() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def _child(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The forked process: become ``python manage.py <argv>`` in ``cwd`` with exactly ``env``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    script = str(Path(cwd) / "manage.py")
    sys.argv = [script, *argv]
    sys.path[0] = cwd  # as ``python manage.py`` puts the script's directory first
    runpy.run_path(script, run_name="__main__")


def run_manage(args: Sequence[str], env: Mapping[str, str], cwd: Path,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``manage.py <args>`` to completion in a forked child; return it as :func:`subprocess.run` would.

    Args:
        args: the command and its arguments (``["audit_modes", "--json"]``).
        env: the child's whole environment.
        cwd: the directory holding ``manage.py`` (the child's working directory).
        timeout: seconds before the child is killed.

    Returns:
        A :class:`subprocess.CompletedProcess` with ``returncode``, ``stdout`` and ``stderr`` (text).

    Raises:
        subprocess.TimeoutExpired: the command ran longer than ``timeout`` (the child is killed).
    """
    with tempfile.TemporaryDirectory(prefix="dfa-manage-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        for path in (out, err):  # present even if the child dies before opening them
            Path(path).touch()
        child = _forkserver().Process(target=_child, args=(list(args), dict(env), str(cwd), out, err))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(["manage.py", *args], timeout)
        stdout = Path(out).read_text(encoding="utf-8", errors="backslashreplace")
        stderr = Path(err).read_text(encoding="utf-8", errors="backslashreplace")
    return subprocess.CompletedProcess(["manage.py", *args], child.exitcode, stdout, stderr)
