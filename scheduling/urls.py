"""Mounted at `api/v1/`; every route answers with and without a trailing slash."""

from django.urls import re_path

from scheduling import api

# Any segment: the view refuses one that is not a UUID as 400 (ICA v1), not as an unknown path.
_PLAN_ID = r"(?P<plan_id>[^/]+)"

urlpatterns = [
    re_path(r"^scheduled-tasks/?$", api.PlansView.as_view(), name="scheduled-tasks"),
    re_path(rf"^scheduled-tasks/{_PLAN_ID}/?$", api.PlanView.as_view(), name="scheduled-task"),
    re_path(rf"^scheduled-tasks/{_PLAN_ID}/runs/?$", api.PlanOccurrencesView.as_view(), name="scheduled-task-runs"),
]
