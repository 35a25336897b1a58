from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from impo import health
from impo.login import throttled_login

handler400 = "impo.errors.json_bad_request"
handler404 = "impo.errors.json_not_found"
handler500 = "impo.errors.json_server_error"

urlpatterns = [
    path("health", health.health, name="health"),
    path("ready", health.ready, name="ready"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/", include("runtime.urls")),
    path("api/v1/", include("scheduling.urls")),
    path("api/v1/", include("tools.urls")),
    # The admin's password form is guarded like the web login (before the admin's own route to it).
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
    path("", include("runtime.web_urls")),
]
