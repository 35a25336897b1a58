"""The web chat: server-rendered shells; the page scripts talk to the same REST + websocket API."""

import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles import finders
from django.http import Http404, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.csrf import ensure_csrf_cookie

from core import errors
from runtime import selectors
from runtime.services import commands
from tools.permissions import permissions_to_wire
from tools.registry import registry

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # ISO order: 1 = Monday

# Paths whose callers are programs: their errors stay ICA v1 JSON. Everything else is a page for a person.
_API_PREFIXES = ("/api/", "/health", "/ready", "/ws/")


def _is_api(request) -> bool:
    return request.path.startswith(_API_PREFIXES)


def push_worker(request):
    """The Web Push service worker (runtime/static/runtime/push-worker.js), served from the site's root: a worker's
    scope cannot be wider than the path it was served from. Revalidated on every load, so a new version is taken up."""
    script = Path(finders.find("runtime/push-worker.js")).read_bytes()
    response = HttpResponse(script, content_type="text/javascript")
    response["Cache-Control"] = "no-cache"
    return response


@login_required
@ensure_csrf_cookie
def main_chat(request):
    # A GET that writes: the page's socket needs Main Chat's id before a first message; get_or_create is idempotent.
    conversation = commands.ensure_main_conversation(request.user)
    return render(
        request,
        "chat/conversation.html",
        {
            "title": conversation.title or selectors.MAIN_CHAT_TITLE,
            "conversation_id": conversation.id,
            "history_url": "/api/v1/conversation",
            "send_url": "/api/v1/conversation/messages",
            "task": None,
            # The bundled double only echoes: the empty state says so, and how to ask it for a tool.
            "local_agent": settings.IMPO_RUNTIME == "echo",
            "tool_words": registry.words_for_people(),
        },
    )


@login_required
@ensure_csrf_cookie
def task_list(request):
    return render(
        request,
        "chat/tasks.html",
        {"tasks": [selectors.task_to_wire(t) for t in selectors.tasks_for_owner(request.user)]},
    )


@login_required
@ensure_csrf_cookie
def task_new(request):
    """An empty composer whose first message starts a Task (the page script posts it to /api/v1/tasks)."""
    return render(request, "chat/new_task.html")


@login_required
@ensure_csrf_cookie
def task_view(request, task_id: uuid.UUID):
    try:
        task = selectors.task_for_owner(request.user, task_id)
    except errors.NotFound as exc:
        raise Http404("No such task.") from exc
    return render(
        request,
        "chat/conversation.html",
        {
            "title": task.title,
            "conversation_id": task.conversation_id,
            "history_url": f"/api/v1/tasks/{task.id}/conversation",
            "send_url": f"/api/v1/tasks/{task.id}/messages",
            "task": task,
            "tool_words": registry.words_for_people(),
        },
    )


@login_required
@ensure_csrf_cookie
def schedules(request):
    """The list, form and runs are drawn by the page script from /api/v1/scheduled-tasks."""
    return render(request, "chat/schedules.html", {"weekdays": WEEKDAYS})


@login_required
@ensure_csrf_cookie
def account(request):
    """The account's page: the tools it always allows (each revoked by the page script through DELETE
    /api/v1/account/tool-permissions/<tool>), its data to download, and its deletion (DELETE /api/v1/account)."""
    return render(request, "chat/account.html", {"tool_permissions": permissions_to_wire(request.user.id)})


def page_not_found(request, exception=None):
    if _is_api(request):
        return errors.json_not_found(request, exception)
    return render(request, "404.html", status=404)


def server_error(request):
    if _is_api(request):
        return errors.json_server_error(request)
    # No request context: whatever failed (the database, a context processor) must not fail this page too.
    return HttpResponseServerError(loader.get_template("500.html").render())


def bad_request(request, exception=None):
    if _is_api(request):
        return errors.json_bad_request(request, exception)
    return render(request, "400.html", status=400)


def csrf_failure(request, reason=""):
    """A refused unsafe request of a signed-in browser: the API's envelope under /api/, Django's page elsewhere."""
    if _is_api(request):
        return errors.json_csrf_failure(request, reason)
    return django_csrf_failure(request, reason)
