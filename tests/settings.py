"""Settings for the test suite: the production settings module with test-safe environment defaults.

Under pytest-xdist every worker (``PYTEST_XDIST_WORKER`` = ``gw0``, ``gw1``, ...) gets its own
``DASHBOARD_VAR_DIR`` (``var/test-<worker>``: the filesystem broker's folders, Celery results, static root),
emptied when the worker starts, so one worker's queued tasks are never seen by another. A serial run uses
``var/test-main``. Child processes that inherit the environment keep the directory their parent chose.
"""

import os
import shutil
from pathlib import Path

os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
# LangGraph reads this at run time; a value in the developer's shell would change what the tests see.
os.environ.pop("LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", None)
if "DASHBOARD_VAR_DIR" not in os.environ:
    _var = Path(__file__).resolve().parents[1] / "var" / f"test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    shutil.rmtree(_var, ignore_errors=True)
    os.environ["DASHBOARD_VAR_DIR"] = str(_var)

from dashboard.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast personas
