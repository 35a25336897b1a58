import factory
from django.contrib.auth import get_user_model

from runtime.models import Message, MessageRole, MessageStatus
from runtime.services.commands import MessageCommand, open_task

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)


def long_task_conversation(owner, messages: int, text: str):
    """A task whose conversation has `messages` settled messages after its first exchange, written in bulk as years of
    use would leave them (setup for the export's tests and bench, not a product write path); returns its id."""
    receipt = open_task(owner=owner, command=MessageCommand(client_message_id="long-task", text="a long one"))
    conversation_id = Message.objects.get(id=receipt.user_message_id).conversation_id
    Message.objects.bulk_create(
        (
            Message(
                conversation_id=conversation_id,
                sequence=10 + index,
                role=MessageRole.USER if index % 2 == 0 else MessageRole.ASSISTANT,
                text=text,
                status=MessageStatus.COMPLETED,
            )
            for index in range(messages)
        ),
        batch_size=2000,
    )
    return conversation_id
