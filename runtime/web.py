"""The web chat: server-rendered shells; the page script talks to the same REST + websocket API."""

import uuid

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from runtime import selectors, services


@login_required
@ensure_csrf_cookie
def main_chat(request):
    conversation = services.ensure_main_conversation(request.user)
    return render(
        request,
        "chat/conversation.html",
        {
            "title": "Main Chat",
            "conversation_id": conversation.id,
            "history_url": "/api/v1/conversation",
            "send_url": "/api/v1/conversation/messages",
            "task": None,
        },
    )


@login_required
def task_list(request):
    return render(
        request,
        "chat/tasks.html",
        {"tasks": [selectors.task_to_wire(t) for t in selectors.tasks_for_owner(request.user)]},
    )


@login_required
@ensure_csrf_cookie
def task_view(request, task_id: uuid.UUID):
    task = selectors.task_for_owner(request.user, task_id)
    return render(
        request,
        "chat/conversation.html",
        {
            "title": task.title,
            "conversation_id": task.conversation_id,
            "history_url": f"/api/v1/tasks/{task.id}/conversation",
            "send_url": f"/api/v1/tasks/{task.id}/messages",
            "task": task,
        },
    )
