"""The admission baseline served by the same server: one bare Django view that runs the admission statement.

No DRF, no middleware, no authentication, validation, limits or on-commit sends: a POST to `/admit/<owner id>`
executes `runtime.services.admission_statement` (the very SQL the real endpoint runs) in one durable transaction.
What the real endpoint costs beyond this is what Impo adds on top of Django and the database.
"""

import json
import os
import uuid
from types import SimpleNamespace

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "impo.settings")
# Pooled connections, as the real web process uses (impo/asgi.py).
os.environ.setdefault("DATABASE_POOL", "1")
django.setup()

from django.conf import settings  # noqa: E402  (needs the app registry)
from django.core.asgi import get_asgi_application  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402

from runtime import limits  # noqa: E402
from runtime.services import admission  # noqa: E402


def admit(request, owner_id: int):
    command = admission.MessageCommand(client_message_id=str(uuid.uuid4()), text=json.loads(request.body)["text"])
    owner = SimpleNamespace(pk=owner_id)
    statement = admission.admission_statement(
        owner,
        admission.MainChatTarget(owner),
        command,
        command.fingerprint("main_chat"),
        limits.active_run_cap(),
        policy_decided=False,
    )
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(statement.sql, statement.params)
        admitted = cursor.fetchone()[4] is not None
    if not admitted:
        return JsonResponse({"admitted": False}, status=409)
    return JsonResponse({"submissionId": str(statement.submission.id)}, status=202)


urlpatterns = [path("admit/<int:owner_id>", admit)]
settings.ROOT_URLCONF = __name__
settings.MIDDLEWARE = []
application = get_asgi_application()
