"""Moved to :mod:`dashboard.errors.jobs`; this old path is the same module object (every name, private ones too)."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("dashboard.errors.jobs")
