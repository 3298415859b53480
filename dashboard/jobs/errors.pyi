# The type checker's view of the moved module (the .py file replaces itself with it in sys.modules).
from dashboard.errors.jobs import *  # noqa: F403
