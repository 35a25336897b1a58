from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from core.login import throttled_login
from runtime.http import web

urlpatterns = [
    path("", web.main_chat, name="main-chat"),
    path("tasks/", web.task_list, name="task-list"),
    path("tasks/new/", web.task_new, name="task-new"),
    path("tasks/<uuid:task_id>/", web.task_view, name="task-view"),
    path("schedules/", web.schedules, name="scheduled-tasks"),
    path("account/", web.account, name="account"),
    path("login/", throttled_login(auth_views.LoginView.as_view()), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The push service worker, at the root so its scope covers every chat page (docs/notifications.md).
    path("push-worker.js", web.push_worker, name="push-worker"),
    # Browsers ask for /favicon.ico on their own (the admin's pages, a JSON response opened in a tab).
    path("favicon.ico", RedirectView.as_view(url=static("runtime/favicon.svg"), permanent=True)),
]
