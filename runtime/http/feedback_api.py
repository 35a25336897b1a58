"""`PUT /api/v1/messages/{id}/feedback`: the owner's thumbs up or down on a reply (docs/api.md "Feedback")."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.openapi import WRITE_ERRORS, responses
from core.serializers import StrictSerializer, validated
from core.views import IcaAPIView
from runtime.models import Feedback
from runtime.services import feedback


class FeedbackSerializer(StrictSerializer):
    rating = serializers.ChoiceField(
        choices=Feedback.choices, allow_null=True, help_text="`up`, `down`, or null to take the rating back."
    )


class FeedbackOutSerializer(serializers.Serializer):
    messageId = serializers.UUIDField()
    feedback = serializers.ChoiceField(choices=Feedback.choices, allow_null=True, help_text="The rating now.")


class FeedbackView(IcaAPIView):
    @extend_schema(
        request=FeedbackSerializer,
        responses=responses({200: FeedbackOutSerializer}, 404, *WRITE_ERRORS),
        examples=[OpenApiExample("Thumbs up", request_only=True, value={"rating": "up"})],
        description="Rates one of your replies (an assistant message): up, down, or null for none; the same again"
        " changes nothing. A user message, or a message that is not yours, is 404. History shows it as `feedback`.",
    )
    def put(self, request, message_id):
        rating = validated(FeedbackSerializer, request.data).validated_data["rating"]
        feedback.rate_reply(owner=request.user, message_id=message_id, rating=rating)
        return Response({"messageId": str(message_id), "feedback": rating})
