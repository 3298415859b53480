#!/usr/bin/env python
"""Django's command-line utility for DeerFlow Checkpoint Admin.

Any command (the project's, Django's, django-axes') that fails with an
unexpected error prints one line naming it and what to do, never a
traceback, unless ``--traceback`` is given (then Python's traceback, as Django
prints it). Dashboard commands already print their known errors as
``CommandError`` with a hint (``dashboard/commands.py``).
"""

import os
import sys

#: Printed after the error line of an unexpected failure.
UNEXPECTED_HINT = "What to do: run the command again with --traceback to see where it failed."
#: Printed after a bad setting (the message names the variable and the values it takes).
SETTING_HINT = "What to do: fix that environment variable (README, Configuration) and run the command again."


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:  # SystemExit and Ctrl-C pass through
        if "--traceback" in sys.argv:
            raise
        from django.core.exceptions import ImproperlyConfigured

        hint = SETTING_HINT if isinstance(exc, ImproperlyConfigured) else UNEXPECTED_HINT
        print(f"{type(exc).__name__}: {exc}\n{hint}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
