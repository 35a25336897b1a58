"""`/api/v1/attachments` (with the local store's `…/<id>/upload`) and `/api/v1/files/upload_<id>` (docs/api.md
"Attachments"). Thin: the work is in services; every lookup is the caller's own (another user's id: 404)."""

import io
import uuid

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from attachments import selectors, services
from attachments.models import AttachmentStatus
from attachments.serializers import (
    DeletedSerializer,
    FileSerializer,
    LimitsSerializer,
    ManifestSerializer,
    PreparedSerializer,
    UploadQuerySerializer,
)
from attachments.storage import store, upload_instructions
from core.error_codes import ErrorCode
from core.errors import refused_fields
from core.openapi import WRITE_ERRORS, responses
from core.views import IcaAPIView

_attachment_id = extend_schema(parameters=[OpenApiParameter("attachment_id", OpenApiTypes.UUID, OpenApiParameter.PATH)])


class AttachmentsView(IcaAPIView):
    @extend_schema(operation_id="v1_attachments_limits", responses=responses({200: LimitsSerializer}))
    def get(self, request):
        return Response(selectors.limits())


class PrepareView(IcaAPIView):
    @extend_schema(
        request=ManifestSerializer,
        responses=responses(
            {200: PreparedSerializer},
            ErrorCode.INVALID_UPLOAD,
            ErrorCode.ATTACHMENT_CONFLICT,
            ErrorCode.ATTACHMENT_QUOTA_EXCEEDED,
            ErrorCode.UNSUPPORTED_FILE_TYPE,
            *WRITE_ERRORS,
        ),
    )
    def post(self, request):
        serializer = ManifestSerializer(data=request.data)
        if not serializer.is_valid():
            raise refused_fields(serializer.errors, ErrorCode.INVALID_UPLOAD)
        data = serializer.validated_data
        manifest = services.Manifest(data["id"], data["name"], data["mediaType"], data["sizeBytes"], data["sha256"])
        attachment = services.prepare(owner=request.user, manifest=manifest)
        if attachment.status == AttachmentStatus.READY:
            return Response({"status": "ready", "file": selectors.file_to_wire(attachment)})
        return Response({"status": "upload", "upload": upload_instructions(attachment, request.build_absolute_uri)})


@_attachment_id
class CompleteView(IcaAPIView):
    @extend_schema(
        request=None,
        responses=responses(
            {200: FileSerializer}, 404, ErrorCode.UPLOAD_INCOMPLETE, ErrorCode.ATTACHMENT_UNREADABLE, *WRITE_ERRORS
        ),
    )
    def post(self, request, attachment_id: uuid.UUID):
        attachment = services.complete(owner=request.user, client_id=attachment_id)
        return Response(selectors.file_to_wire(attachment))


@_attachment_id
class AttachmentView(IcaAPIView):
    @extend_schema(request=None, responses=responses({200: DeletedSerializer}, 404, ErrorCode.ATTACHMENT_IN_USE, 503))
    def delete(self, request, attachment_id: uuid.UUID):
        services.delete(owner=request.user, client_id=attachment_id)
        return Response({"deleted": True})


@_attachment_id
class UploadView(IcaAPIView):
    """The local store's PUT: the URL's signed ticket is the authority (as an S3 presigned URL is), so it takes no
    session or token; the body is read as it arrived at the edge, bounded by the manifest's size."""

    authentication_classes = ()
    permission_classes = ()
    query_serializer = UploadQuerySerializer

    @extend_schema(
        operation_id="v1_attachment_upload",
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            204: OpenApiResponse(description="The bytes are stored."),
            **responses({}, 404, ErrorCode.INVALID_UPLOAD, 408, 413, 503),
        },
    )
    def put(self, request, attachment_id: uuid.UUID):
        services.receive_upload(
            client_id=attachment_id, token=self.query["ticket"], body=request.stream or io.BytesIO()
        )
        return Response(status=204)


@_attachment_id
class FileView(IcaAPIView):
    @extend_schema(
        operation_id="v1_files_retrieve",
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="The original bytes."),
            **responses({}, 404),
        },
    )
    def get(self, request, attachment_id: uuid.UUID):
        attachment = selectors.ready_attachment_for_owner(request.user, attachment_id)
        response = FileResponse(
            store().open(attachment.key, "rb"),
            as_attachment=True,
            filename=attachment.name,
            content_type=attachment.media_type,
        )
        # The owner's bytes are never run as a page of this site, cached on the way, or sniffed into another type.
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "private, no-store"
        response["Content-Security-Policy"] = "sandbox"
        return response
