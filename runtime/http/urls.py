from django.urls import path

from runtime.http import api, capability_api, editing
from runtime.http.feedback_api import FeedbackView
from runtime.realtime import sse

urlpatterns = [
    path("conversation/messages", api.MainChatMessagesView.as_view(), name="main-chat-messages"),
    path("conversation", api.MainChatConversationView.as_view(), name="main-chat-conversation"),
    path("conversations", api.ConversationsView.as_view(), name="conversations"),
    path("conversations/<ica_uuid:conversation_id>", api.ConversationView.as_view(), name="conversation"),
    path("tasks", api.TasksView.as_view(), name="tasks"),
    path("tasks/<ica_uuid:task_id>", api.TaskView.as_view(), name="task"),
    path("tasks/<ica_uuid:task_id>/messages", api.TaskMessagesView.as_view(), name="task-messages"),
    path("tasks/<ica_uuid:task_id>/conversation", api.TaskConversationView.as_view(), name="task-conversation"),
    path("messages/<ica_uuid:message_id>/regenerate", api.RegenerateView.as_view(), name="message-regenerate"),
    path("messages/<ica_uuid:message_id>/edit", editing.EditView.as_view(), name="message-edit"),
    path("messages/<ica_uuid:message_id>/feedback", FeedbackView.as_view(), name="message-feedback"),
    path("submissions/<ica_uuid:submission_id>", api.SubmissionView.as_view(), name="submission"),
    path("submissions/<ica_uuid:submission_id>/cancel", api.SubmissionCancelView.as_view(), name="submission-cancel"),
    path("submissions/<ica_uuid:submission_id>/retry", api.SubmissionRetryView.as_view(), name="submission-retry"),
    path("tool-calls/<ica_uuid:tool_call_id>/approval", api.ToolCallApprovalView.as_view(), name="tool-call-approval"),
    path("approvals/decide", capability_api.ApprovalCapabilityDecisionView.as_view(), name="approval-decide"),
    path("submissions/<ica_uuid:submission_id>/stream", sse.submission_stream, name="submission-stream"),
]
