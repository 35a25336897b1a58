import environ
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

env = environ.Env()


class Command(BaseCommand):
    help = "Creates the local demo account (if missing) and prints its API token."

    def handle(self, *args, **options):
        # The demo superuser's password is published in the README: on anything but a developer's machine it
        # would be an open door. So it is made only when asked for explicitly (`make run` does), DEBUG or not:
        # a deployment that turned DEBUG on to look at a problem must not get an open door with it.
        if not env.bool("IMPO_DEMO_USER_FORCE", default=False):
            raise CommandError(
                "Refusing to create the demo superuser unless IMPO_DEMO_USER_FORCE=true (local use only)."
            )
        username = env("IMPO_DEMO_USERNAME", default="demo")
        password = env("IMPO_DEMO_PASSWORD", default="impo-demo-password")
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(f"demo user: {username} / {password if created else '(unchanged password)'}")
        self.stdout.write(f"API token: {token.key}")
