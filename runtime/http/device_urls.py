"""The device bridge's routes (ICA v1), under `api/v1/`."""

from django.urls import path

from runtime.http import device_api as api

urlpatterns = [
    path("devices/register", api.DeviceRegisterView.as_view(), name="device-register"),
    path(
        "devices/<ica_uuid:device_id>/tool-invocations", api.DeviceInvocationsView.as_view(), name="device-invocations"
    ),
    path(
        "device-tool-invocations/<ica_uuid:invocation_id>/claim",
        api.InvocationClaimView.as_view(),
        name="device-invocation-claim",
    ),
    path(
        "device-tool-invocations/<ica_uuid:invocation_id>/result",
        api.InvocationResultView.as_view(),
        name="device-invocation-result",
    ),
]
