"""Rows the tests build by hand, where going through the API or a service would hide what the test is about (a
state no API reaches directly: a parked run's uncertain call, a half-settled intent, a skipped occurrence).

Rows the API makes (messages, submissions, runs, tasks, plans, devices, webhooks) are made through it: see
tests/client.py, tests/devices.py and tests/scheduling/plans.py.
"""

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.authtoken.models import Token

from rebyte.models import CreationIntent, IntentKind, IntentState, RemoteSession, RemoteTurn
from runtime.models import Conversation, ConversationKind
from scheduling.models import Occurrence
from tools.models import ToolCall, ToolReceipt

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)


class TokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Token

    user = factory.SubFactory(UserFactory)


class TaskConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    owner = factory.SubFactory(UserFactory)
    kind = ConversationKind.TASK
    title = factory.Sequence(lambda n: f"task {n}")


class ToolCallFactory(factory.django.DjangoModelFactory):
    """A call of `run` (required: a run comes from a posted message)."""

    class Meta:
        model = ToolCall

    call_id = factory.Sequence(lambda n: f"call-{n}")
    tool_name = "current_time"
    arguments = factory.LazyFunction(dict)


class ToolReceiptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ToolReceipt

    tool_call = factory.SubFactory(ToolCallFactory)
    result = factory.LazyFunction(lambda: {"output": {}})


class RemoteTurnFactory(factory.django.DjangoModelFactory):
    """The provider turn of `run` (required)."""

    class Meta:
        model = RemoteTurn

    turn_id = factory.Sequence(lambda n: f"turn-{n}")


class CreationIntentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CreationIntent

    owner = factory.SubFactory(UserFactory)
    kind = IntentKind.AGENT
    state = IntentState.INTENDED


class RemoteSessionFactory(factory.django.DjangoModelFactory):
    """A current session of `conversation` on `saved_agent` (both required), with its settled creation intent."""

    class Meta:
        model = RemoteSession

    remote_id = factory.Sequence(lambda n: f"sess_{n}")
    intent = factory.SubFactory(
        CreationIntentFactory,
        owner=factory.SelfAttribute("..conversation.owner"),
        kind=IntentKind.SESSION,
        conversation=factory.SelfAttribute("..conversation"),
        state=IntentState.CREATED,
        remote_id=factory.SelfAttribute("..remote_id"),
    )
    last_activity_at = factory.LazyFunction(timezone.now)


class OccurrenceFactory(factory.django.DjangoModelFactory):
    """An occurrence of `plan` (required) at its current revision."""

    class Meta:
        model = Occurrence

    revision = factory.SelfAttribute("plan.revision")
    scheduled_at = factory.LazyFunction(timezone.now)
