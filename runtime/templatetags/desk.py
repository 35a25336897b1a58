"""The admin index's reconciliation desk: how many records wait for a staff decision, each a link."""

from django import template
from django.urls import reverse

from rebyte.models import CreationIntent, DeletionIntent, DeletionState, IntentState
from runtime.models import Run, RunState
from tools.models import ApprovalStatus, ToolApproval, ToolCall, ToolCallState

register = template.Library()


@register.simple_tag
def reconciliation_desk() -> list[dict]:
    return [
        {
            "key": "runs",
            "label": "Runs pending reconciliation",
            "count": Run.objects.filter(state=RunState.PENDING_RECONCILIATION).count(),
            "url": f"{reverse('admin:runtime_run_changelist')}?state__exact={RunState.PENDING_RECONCILIATION}",
        },
        {
            "key": "tool_calls",
            "label": "Tool calls with an uncertain outcome",
            "count": ToolCall.objects.filter(state=ToolCallState.UNCERTAIN).count(),
            "url": f"{reverse('admin:tools_toolcall_changelist')}?state__exact={ToolCallState.UNCERTAIN}",
        },
        {
            "key": "tool_approvals",
            "label": "Tool calls awaiting their owner's approval",
            "count": ToolApproval.objects.filter(status=ApprovalStatus.PENDING).count(),
            "url": f"{reverse('admin:tools_toolapproval_changelist')}?status__exact={ApprovalStatus.PENDING}",
        },
        {
            "key": "creation_intents",
            "label": "Remote creations pending reconciliation",
            "count": CreationIntent.objects.filter(state=IntentState.PENDING_RECONCILIATION).count(),
            "url": f"{reverse('admin:rebyte_creationintent_changelist')}?open=pending",
        },
        {
            # Retried with backoff on their own; listed so a provider refusing them for long is seen.
            "key": "deletion_intents",
            "label": "Remote deletions waiting on the provider",
            "count": DeletionIntent.objects.filter(state=DeletionState.PENDING).count(),
            "url": f"{reverse('admin:rebyte_deletionintent_changelist')}?waiting=yes",
        },
    ]
