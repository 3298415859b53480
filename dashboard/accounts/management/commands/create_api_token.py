"""``python manage.py create_api_token <username> [--name NAME] [--scope S ...] [--expires-days N]``.

Prints a new API token once (it is stored hashed).
"""

import datetime as dt

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from dashboard.accounts.models import ALL_SCOPES, ApiToken
from dashboard.commands import DashboardCommand


class Command(DashboardCommand):
    help = "Create an API bearer token for a staff user and print it (it is stored hashed, shown once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label for the token")
        parser.add_argument("--scope", action="append", choices=ALL_SCOPES, dest="scopes",
                            help="what the token may do, repeatable: read (GETs), heartbeat (outside processes' "
                                 "heartbeats), manage (POST /api/jobs). Default: all three; the user's "
                                 "permissions still apply")
        parser.add_argument("--expires-days", type=int, default=None, metavar="N",
                            help="the token stops working after N days (default: never)")

    def handle(self, *args, username: str, name: str, scopes, expires_days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}. Create one with: python manage.py createsuperuser")
        if not user.is_staff:
            raise CommandError(f"User {username!r} is not staff; the API only serves staff users.")
        if expires_days is not None and not 1 <= expires_days <= 3650:
            raise CommandError(f"--expires-days {expires_days}: give a number of days from 1 to 3650.")
        expires_at = timezone.now() + dt.timedelta(days=expires_days) if expires_days else None
        _token, raw = ApiToken.issue(user, name=name, scopes=scopes or ALL_SCOPES, expires_at=expires_at)
        self.stdout.write(raw)
