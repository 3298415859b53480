"""``python manage.py ensure_demo_admin``: create (once) a staff superuser ``admin`` and print its credentials.

The password is random, kept in ``$DASHBOARD_VAR_DIR/demo-admin-password``
(mode 0600) so later runs print the same credentials. For local demos only.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model

from dashboard.commands import DashboardCommand


class Command(DashboardCommand):
    help = "Create the demo admin user if missing and print its username and password."

    def handle(self, *args, **options):
        path = settings.VAR_DIR / "demo-admin-password"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            password = path.read_text(encoding="utf-8").strip()
        else:
            password = secrets.token_urlsafe(12)
            path.write_text(password + "\n", encoding="utf-8")
            path.chmod(0o600)
        User = get_user_model()
        user = User.objects.filter(username="admin").first()
        if user is None:
            User.objects.create_superuser("admin", "admin@localhost", password)
        elif not user.check_password(password):
            user.set_password(password)
            user.is_staff = user.is_superuser = True
            user.save()
        self.stdout.write(f"username: admin\npassword: {password}")
