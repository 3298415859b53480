"""``python manage.py create_api_token <username> [--name NAME]``: print a new API token once."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from dashboard.accounts.models import ApiToken
from dashboard.commands import DashboardCommand


class Command(DashboardCommand):
    help = "Create an API bearer token for a staff user and print it (it is stored hashed, shown once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label for the token")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}. Create one with: python manage.py createsuperuser")
        if not user.is_staff:
            raise CommandError(f"User {username!r} is not staff; the API only serves staff users.")
        _token, raw = ApiToken.issue(user, name=name)
        self.stdout.write(raw)
