"""Mounted at `api/v1/`; every route answers with and without a trailing slash."""

from django.urls import re_path

from webhooks import api, push_api

# Any segment: the view refuses one that is not a UUID as 400 (ICA v1), not as an unknown path.
_ENDPOINT_ID = r"(?P<endpoint_id>[^/]+)"
_SUBSCRIPTION_ID = r"(?P<subscription_id>[^/]+)"

urlpatterns = [
    re_path(r"^webhooks/?$", api.WebhookEndpointsView.as_view(), name="webhooks"),
    re_path(rf"^webhooks/{_ENDPOINT_ID}/?$", api.WebhookEndpointView.as_view(), name="webhook"),
    re_path(rf"^webhooks/{_ENDPOINT_ID}/deliveries/?$", api.WebhookDeliveriesView.as_view(), name="webhook-deliveries"),
    re_path(r"^push-subscriptions/?$", push_api.PushSubscriptionsView.as_view(), name="push-subscriptions"),
    re_path(
        rf"^push-subscriptions/{_SUBSCRIPTION_ID}/?$", push_api.PushSubscriptionView.as_view(), name="push-subscription"
    ),
    re_path(
        r"^notification-preferences/?$", push_api.NotificationPreferencesView.as_view(), name="notification-preferences"
    ),
]
