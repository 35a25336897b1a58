from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

from core import errors
from core.login import throttled_login
from impo import health, metrics

# The API answers errors in ICA v1 JSON; the web pages answer them as pages.
handler400 = "runtime.http.web.bad_request"
handler404 = "runtime.http.web.page_not_found"
handler500 = "runtime.http.web.server_error"

urlpatterns = [
    path("health", health.health, name="health"),
    path("ready", health.ready, name="ready"),
    path("metrics", metrics.metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The schema to read in a browser: Redoc, vendored (drf-spectacular-sidecar), with no outside fonts or hosts.
    path("api/docs/", SpectacularRedocView.as_view(url_name="schema", template_name="api_docs.html"), name="api-docs"),
    path("api/v1/", include("runtime.http.urls")),
    path("api/v1/", include("scheduling.urls")),
    path("api/v1/", include("runtime.http.device_urls")),
    path("api/v1/", include("webhooks.urls")),
    path("api/v1/", include("attachments.urls")),
    # The account's data across every app (export, deletion), composed by the app above them all.
    path("api/v1/", include("accounts.urls")),
    # Any other path under /api/ is the API's 404, in its envelope, in every configuration (DEBUG's technical 404
    # page would otherwise answer it, and CommonMiddleware would redirect it to a slash-ended path).
    re_path(r"^api/", errors.json_not_found),
    # The admin's password form is guarded like the web login (before the admin's own route to it).
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
    path("", include("runtime.http.web_urls")),
]
