"""Mounted at `api/v1/`; every route answers with and without a trailing slash."""

from django.urls import re_path

from attachments import views

# Any segment: the view refuses one that is not a UUID as 400 (ICA v1), not as an unknown path.
_ATTACHMENT_ID = r"(?P<attachment_id>[^/]+)"

urlpatterns = [
    re_path(r"^attachments/?$", views.AttachmentsView.as_view(), name="attachments"),
    re_path(r"^attachments/prepare/?$", views.PrepareView.as_view(), name="attachments-prepare"),
    re_path(rf"^attachments/{_ATTACHMENT_ID}/complete/?$", views.CompleteView.as_view(), name="attachment-complete"),
    re_path(rf"^attachments/{_ATTACHMENT_ID}/?$", views.AttachmentView.as_view(), name="attachment"),
    re_path(rf"^attachments/{_ATTACHMENT_ID}/upload/?$", views.UploadView.as_view(), name="attachment-upload"),
    re_path(rf"^files/upload_{_ATTACHMENT_ID}/?$", views.FileView.as_view(), name="file"),
]
