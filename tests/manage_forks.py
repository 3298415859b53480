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
from typing import Any

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


def _write_fd_to(fd: int, path: str) -> None:
    """Point file descriptor ``fd`` of this process at ``path`` (created or emptied)."""
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(target, fd)
    os.close(target)


def _std_streams_on_fds() -> None:
    """``sys.stdout`` and ``sys.stderr`` written, line by line, to whatever fds 1 and 2 now are."""
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def _child(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The forked process: become ``python manage.py <argv>`` in ``cwd`` with exactly ``env``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        _write_fd_to(fd, path)
    _std_streams_on_fds()
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


def _script_child(code: str, argv: list[str], cwd: str, out: Any, err_path: str) -> None:
    """The forked process: become ``python -c <code> <argv>`` in ``cwd``, stdout on the pipe ``out``."""
    os.chdir(cwd)
    os.dup2(out.fileno(), 1)
    out.close()
    _write_fd_to(2, err_path)
    _std_streams_on_fds()
    sys.argv = ["-c", *argv]
    sys.path[0] = cwd  # as ``python -c`` puts the working directory first
    exec(compile(code, "<forked script>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the test's own code


class ForkedScript:
    """``python -c <code> <argv...>`` started in a child of the fork server, driven like a :class:`subprocess.Popen`.

    For tests that start the same short script dozens of times and kill it (``SIGKILL`` trials): the child
    skips the second of third-party imports a cold interpreter pays, and is otherwise a process of its own
    (its own connections, opened after the fork; killing it is ``kill -9`` of a real process).

    Attributes:
        stdout: the child's standard output, as text, line-buffered (``readline()``, ``read()``).
        stderr_path: where its standard error goes (read it after it exits).
    """

    def __init__(self, code: str, argv: Sequence[str], cwd: Path) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="dfa-script-")
        self.stderr_path = Path(self._tmp.name) / "stderr"
        self.stderr_path.touch()
        # A one-way pipe whose ends travel to the fork server's child as file descriptors; only the
        # descriptors are used (the child's fd 1 is the write end), never Connection's message framing.
        reader, writer = multiprocessing.Pipe(duplex=False)
        self._process = _forkserver().Process(target=_script_child,
                                              args=(code, list(argv), str(cwd), writer, str(self.stderr_path)))
        self._process.start()
        writer.close()
        self.stdout = open(os.dup(reader.fileno()), encoding="utf-8")  # noqa: SIM115 - closed by close()
        reader.close()

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or ``None`` while it runs."""
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; its exit code.

        Raises:
            subprocess.TimeoutExpired: it still runs after ``timeout`` seconds.
        """
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("forked script", timeout or 0)
        return self._process.exitcode

    def kill(self) -> None:
        """``SIGKILL`` the child (nothing if it has ended)."""
        if self._process.exitcode is None:
            self._process.kill()

    def kill_after(self, delay: float) -> bool:
        """Wait up to ``delay`` seconds; if the child still runs then, ``SIGKILL`` it and wait for it to be gone.

        Returns:
            ``True`` when it was killed, ``False`` when it ended on its own first.
        """
        try:
            self.wait(timeout=delay)
            return False
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.wait(timeout=30)
        return True

    def close(self) -> None:
        """Kill the child if it still runs, wait for it, and release the pipe and the temporary directory."""
        self.kill()
        self._process.join()
        self.stdout.close()
        self._tmp.cleanup()
