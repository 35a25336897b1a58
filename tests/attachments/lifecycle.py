"""What the lifecycle tests share: a file sent with a message (linked through `Attachment.messages`, as admission
links it), and the sweeper's pass run in this process until a deletion is done."""

from attachments.models import Attachment
from devtools.stack import wait_until
from impo.management.commands.run_sweeper import Command as Sweeper
from runtime.models import Message


def carried_by(client_id, *message_ids) -> None:
    Attachment.objects.get(client_id=client_id).messages.add(*Message.objects.filter(id__in=message_ids))


def sweep_until(condition, *, what: str, timeout: float = 60):
    """The sweeper's real pass (conversations' and accounts' deletions, then the attachments'), again and again
    until `condition()` holds."""

    def swept():
        Sweeper().run_pass()
        return condition()

    return wait_until(swept, timeout=timeout, interval=0.2, what=what)


def files_of(owner) -> set[str]:
    return {str(client_id) for client_id in Attachment.objects.filter(owner=owner).values_list("client_id", flat=True)}
