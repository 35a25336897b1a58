"""Mounted at `api/v1/`; every route answers with and without a trailing slash."""

from django.urls import re_path

from scheduling import api

_PLAN_ID = r"(?P<plan_id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"

urlpatterns = [
    re_path(r"^scheduled-tasks/?$", api.ScheduledTasksView.as_view(), name="scheduled-tasks"),
    re_path(rf"^scheduled-tasks/{_PLAN_ID}/?$", api.ScheduledTaskView.as_view(), name="scheduled-task"),
    re_path(rf"^scheduled-tasks/{_PLAN_ID}/runs/?$", api.ScheduledTaskRunsView.as_view(), name="scheduled-task-runs"),
]
