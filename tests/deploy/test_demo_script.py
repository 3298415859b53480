"""``make demo`` (scripts/demo.sh) refuses a port already in use before it starts anything."""

from __future__ import annotations

import os
import socket
import subprocess

from tests.integration.helpers import REPO_ROOT


def test_a_busy_port_is_refused_with_what_to_do(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "PORT": str(port), "DASHBOARD_VAR_DIR": str(tmp_path / "var")}
        done = subprocess.run(["bash", "scripts/demo.sh"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Port {port} on 127.0.0.1 is in use (is the demo already running?). "
                                   f"Stop it, or run: PORT={port + 1} make demo")  # 8000 -> 8001, as the README says
    assert done.stdout == "" and not (tmp_path / "var" / "data").exists()  # nothing loaded, no password printed
