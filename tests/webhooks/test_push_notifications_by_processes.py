"""Notifications pushed by the real webhooks loop (its push sender) to a local push service of the suite's own
(devtools/push_service.py), which checks each push's VAPID token and decrypts it as the browser would: exactly one
decrypted notification per run and kind, through failures of the push service, of the sender and of Redis."""

import asyncio
import time
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from devtools.push_service import HANG, Browser, PushService, vapid_public_key_of
from devtools.stack import free_port, wait_until
from impo.asgi import application
from runtime import subscribers
from runtime.models import Notification, NotificationKind, RunState
from tests.client import finished_run, post_message
from tests.faults.instances import PrivateRedis
from webhooks.models import PushDelivery, PushStatus, PushSubscription

# Three times the stack's webhook backoff cap (4 s, devtools/stack.py): the retries reach the cap during the outage.
PUSH_SERVICE_DOWN_SECONDS = 12


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    """The push service listens on loopback over plain http: allowed explicitly here, as in the stack's processes."""
    settings.IMPO_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.IMPO_WEBHOOK_ALLOW_HTTP = True


@pytest.fixture
def push_service(stack, settings):
    """Checks pushes against the stack's VAPID key, which the API (this process) serves too."""
    settings.IMPO_VAPID_PRIVATE_KEY = stack.env["IMPO_VAPID_PRIVATE_KEY"]
    service = PushService(free_port(), vapid_public_key_of(stack.env["IMPO_VAPID_PRIVATE_KEY"]))
    yield service
    service.stop()


def subscribe(api, browser: Browser) -> dict:
    response = api.post("/api/v1/push-subscriptions", browser.to_json(), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def submitted(api, text: str) -> str:
    """A message with a client id of its own (a test may send several); its submission id."""
    return post_message(api, text, client_message_id=str(uuid.uuid4()))["submissionId"]


def settled_delivery(timeout: float = 90) -> PushDelivery:
    return wait_until(
        lambda: PushDelivery.objects.exclude(status=PushStatus.PENDING).first(),
        timeout=timeout,
        what="the push to settle",
    )


def nothing_secret_in(process, browser: Browser) -> bool:
    log = process.log_text()
    keys = browser.to_json()["keys"]
    return browser.token not in log and keys["p256dh"] not in log and keys["auth"] not in log


def test_a_finished_reply_reaches_the_browser_once_signed_and_encrypted(stack, api, push_service):
    stack.start_worker()
    loop = stack.start_webhooks()
    push_service.start()
    browser = push_service.subscribe()
    subscribe(api, browser)

    run = finished_run(submitted(api, "tell me when you are done"))

    assert run.state == RunState.COMPLETED
    wait_until(lambda: push_service.accepted_for(browser), timeout=30, what="the push")
    delivery = settled_delivery()
    assert delivery.status == PushStatus.SENT
    [accepted] = push_service.accepted_for(browser)
    assert push_service.refused == []
    assert accepted.payload["kind"] == "completed"
    assert accepted.payload["title"] == "Main Chat"
    assert accepted.payload["runId"] == str(run.id)
    assert accepted.payload["messageId"] == str(run.submission.assistant_message_id)
    assert accepted.payload["url"] == f"/#message-{run.submission.assistant_message_id}"
    reply = " ".join(run.submission.assistant_message.text.split())
    assert accepted.payload["body"] and reply.startswith(accepted.payload["body"].rstrip("…"))
    assert accepted.topic and len(accepted.topic) <= 32
    assert accepted.urgency == "normal" and accepted.ttl > 0
    assert Notification.objects.get(run=run).dispatched_at is not None
    assert nothing_secret_in(loop, browser)


def test_a_push_service_down_for_three_backoff_caps_then_busy_still_gets_one_notification(stack, api, push_service):
    stack.start_worker()
    stack.start_webhooks()
    browser = push_service.subscribe()
    subscribe(api, browser)
    push_service.answer((429, 1), 503)  # once it is back: too many requests, then a server error, then 201

    run = finished_run(submitted(api, "the push service is away"))
    delivery = wait_until(
        lambda: PushDelivery.objects.filter(attempts__gte=1).first(), timeout=30, what="the first attempt"
    )
    down_until = delivery.last_attempt_at.timestamp() + PUSH_SERVICE_DOWN_SECONDS
    wait_until(
        lambda: time.time() >= down_until and PushDelivery.objects.get(id=delivery.id).attempts >= 3,
        timeout=PUSH_SERVICE_DOWN_SECONDS + 30,
        interval=0.5,
        what="the push service's outage to last, with retries meanwhile",
    )
    refused = PushDelivery.objects.get(id=delivery.id)
    assert (refused.status, refused.last_error) == (PushStatus.PENDING, "connection failed")
    push_service.start()

    sent = settled_delivery()

    assert sent.status == PushStatus.SENT
    assert sent.attempts >= refused.attempts + 3
    assert push_service.attempts == 3
    assert [each.payload["runId"] for each in push_service.accepted_for(browser)] == [str(run.id)]


def test_a_sender_killed_while_its_push_is_unanswered_sends_it_again_and_the_browser_gets_one(stack, api, push_service):
    """The claim is committed and the push is on the wire when the sender dies (SIGKILL): nothing confirmed it, so
    a new sender sends it again once the claim's deadline passes. The push service accepted only the second copy,
    and a copy it had accepted would have been replaced (same Topic)."""
    stack.start_worker()
    first = stack.start_webhooks()
    push_service.start()
    browser = push_service.subscribe()
    subscribe(api, browser)
    push_service.answer(HANG)

    run = finished_run(submitted(api, "the sender will die"))
    wait_until(lambda: push_service.attempts >= 1, timeout=30, what="the push to reach the push service")
    assert PushDelivery.objects.get().attempts == 1
    first.kill()
    stack.start_webhooks()

    sent = settled_delivery(timeout=120)

    assert (sent.status, sent.attempts) == (PushStatus.SENT, 2)
    assert [each.payload["runId"] for each in push_service.accepted_for(browser)] == [str(run.id)]
    assert len(push_service.notifications(browser)) == 1


def test_a_subscription_the_push_service_says_is_gone_is_removed_and_never_pushed_again(stack, api, push_service):
    stack.start_worker()
    stack.start_webhooks()
    push_service.start()
    browser = push_service.subscribe()
    subscription = subscribe(api, browser)
    push_service.answer(410)

    finished_run(submitted(api, "nobody is there"))
    wait_until(
        lambda: not PushSubscription.objects.filter(id=subscription["id"]).exists(),
        timeout=30,
        what="the subscription to be removed",
    )
    finished_run(submitted(api, "still nobody"))
    wait_until(
        lambda: (
            Notification.objects.filter(dispatched_at__isnull=True).count() == 0 and Notification.objects.count() == 2
        ),
        timeout=30,
        what="the second notification to be dispatched",
    )

    assert push_service.attempts == 1
    assert push_service.accepted == []
    assert api.get("/api/v1/push-subscriptions").json()["subscriptions"] == []


def test_the_answers_to_pushes_claimed_together_are_each_recorded_on_their_own_delivery(stack, api, push_service):
    """A run ends for an owner with three browsers, before the sender starts: its first pass claims the three pushes
    together, and records what each browser's push service answered on that push alone."""
    stack.start_worker()
    push_service.start()
    kept, gone, busy = (push_service.subscribe() for _ in range(3))
    subscriptions = {browser.token: subscribe(api, browser)["id"] for browser in (kept, gone, busy)}
    push_service.answer_for(gone, 410)
    push_service.answer_for(busy, 503)
    run = finished_run(submitted(api, "three browsers"))

    stack.start_webhooks()
    retried = wait_until(
        lambda: PushDelivery.objects.filter(subscription_id=subscriptions[busy.token], status=PushStatus.SENT).first(),
        timeout=60,
        what="the busy browser's push to be sent on its second attempt",
    )

    first = PushDelivery.objects.get(subscription_id=subscriptions[kept.token])
    assert (first.status, first.attempts, first.last_response_code) == (PushStatus.SENT, 1, 201)
    assert (retried.attempts, retried.last_response_code, retried.last_error) == (2, 201, "")
    assert not PushSubscription.objects.filter(id=subscriptions[gone.token]).exists()
    assert push_service.attempts == 4
    assert [each.payload["runId"] for each in push_service.accepted_for(kept)] == [str(run.id)]
    assert [each.payload["runId"] for each in push_service.accepted_for(busy)] == [str(run.id)]
    assert push_service.accepted_for(gone) == []


def test_a_kind_turned_off_is_not_pushed(stack, api, push_service):
    stack.start_worker()
    stack.start_webhooks()
    push_service.start()
    subscribe(api, push_service.subscribe())
    api.put("/api/v1/notification-preferences", {"kinds": {"completed": False}}, format="json")

    run = finished_run(submitted(api, "do not tell me"))
    wait_until(
        lambda: Notification.objects.filter(run=run, dispatched_at__isnull=False).exists(),
        timeout=30,
        what="the notification to be dispatched",
    )

    assert not PushDelivery.objects.exists()
    assert push_service.attempts == 0


def test_a_run_finishing_while_redis_is_stopped_is_still_pushed_once(transactional_db, rebyte_double, api, settings):
    """A stack of its own on a private Redis (never the machine's): the run finishes with Redis up (its sweeper wakes
    the worker there), then Redis stops before the sender starts; the sender needs only PostgreSQL (whether a page is
    in view reads as no)."""
    from devtools.stack import Stack

    redis = PrivateRedis()
    own = Stack(database_name=connection.settings_dict["NAME"], double=rebyte_double, redis_url=redis.url)
    settings.IMPO_VAPID_PRIVATE_KEY = own.env["IMPO_VAPID_PRIVATE_KEY"]
    service = PushService(free_port(), vapid_public_key_of(own.env["IMPO_VAPID_PRIVATE_KEY"])).start()
    try:
        own.start_worker()
        own.start_sweeper()
        browser = service.subscribe()
        subscribe(api, browser)
        run = finished_run(submitted(api, "finish, then lose redis"))
        redis.stop()
        own.start_webhooks()

        wait_until(lambda: service.accepted_for(browser), timeout=60, what="the push without Redis")
        assert settled_delivery().status == PushStatus.SENT
        assert [each.payload["runId"] for each in service.accepted_for(browser)] == [str(run.id)]
    finally:
        own.stop()
        service.stop()
        redis.stop()


def test_no_push_while_a_page_of_the_conversation_is_in_view_and_one_once_it_is_hidden(stack, api, user, push_service):
    stack.start_worker()
    stack.start_webhooks()
    push_service.start()
    browser = push_service.subscribe()
    subscribe(api, browser)
    finished_run(submitted(api, "open the conversation"))
    wait_until(lambda: push_service.accepted_for(browser), timeout=30, what="the first push (no page open)")
    conversation_id = api.get("/api/v1/conversation").json()["conversationId"]
    token = Token.objects.get_or_create(user=user)[0].key
    path = f"/ws/v1/conversations/{conversation_id}/?after=0&token={token}"

    def closing(call, *args, **kwargs):
        """Runs a blocking call on an executor thread, giving back the connection it opened there."""
        try:
            return call(*args, **kwargs)
        finally:
            connection.close()

    async def run_while(visible: bool, text: str):
        socket = WebsocketCommunicator(application, path)
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "visibility", "visible": visible})
        await asyncio.to_thread(  # the consumer records it before the run is admitted
            wait_until,
            lambda: (conversation_id in subscribers.conversations_in_view([conversation_id])) == visible,
            timeout=30,
            what=f"the page to be {'in' if visible else 'out of'} view",
        )
        submission_id = await asyncio.to_thread(closing, submitted, api, text)
        run = await asyncio.to_thread(closing, finished_run, submission_id)
        await asyncio.to_thread(
            closing,
            wait_until,
            lambda: Notification.objects.filter(run=run, dispatched_at__isnull=False).exists(),
            timeout=30,
            what="the notification to be dispatched",
        )
        await socket.disconnect()
        return run

    watched = async_to_sync(run_while)(True, "I am looking")
    hidden = async_to_sync(run_while)(False, "I looked away")

    wait_until(lambda: len(push_service.accepted_for(browser)) == 2, timeout=30, what="the push of the hidden page")
    pushed = [each.payload["runId"] for each in push_service.accepted_for(browser)]
    assert str(watched.id) not in pushed
    assert pushed[-1] == str(hidden.id)
    assert not PushDelivery.objects.filter(notification__run=watched).exists()


def test_an_endpoint_whose_name_resolves_inside_is_refused_at_send_time(stack, api, user, push_service):
    """Registered while the name was allowed (or pointed elsewhere); at send time `localhost` resolves to loopback,
    which the sender's settings do not allow: no request is made."""
    stack.env["IMPO_WEBHOOK_ALLOWED_NETWORKS"] = ""
    stack.start_worker()
    stack.start_webhooks()
    push_service.start()
    browser = push_service.subscribe()
    PushSubscription.objects.create(
        owner=user,
        endpoint=f"http://localhost:{push_service.port}/push/{browser.token}",
        p256dh=browser.to_json()["keys"]["p256dh"],
        auth=browser.to_json()["keys"]["auth"],
    )

    finished_run(submitted(api, "send it inside"))
    refused = settled_delivery()

    assert (refused.status, refused.last_error) == (PushStatus.FAILED, "target forbidden")
    assert push_service.attempts == 0


def test_an_approval_push_carries_what_to_open_and_its_approve_action_lets_the_run_go_on(stack, api, push_service):
    stack.env["IMPO_TOOL_APPROVAL"] = "save_note=always"
    stack.start_worker()
    loop = stack.start_webhooks()
    push_service.start()
    browser = push_service.subscribe()
    subscribe(api, browser)

    submission_id = post_message(api, '/tool save_note {"text": "buy milk"}')["submissionId"]
    wait_until(lambda: push_service.accepted_for(browser), timeout=60, what="the approval push")

    [accepted] = push_service.accepted_for(browser)
    assert accepted.payload["kind"] == NotificationKind.APPROVAL
    assert accepted.urgency == "high"
    assert "save_note" in accepted.payload["body"]
    assert accepted.payload["url"] == f"/#approval-{accepted.payload['toolCallId']}"
    actions = {action["action"]: action for action in accepted.payload["actions"]}
    assert [(action["action"], action["title"]) for action in accepted.payload["actions"]] == [
        ("approve", "Approve"),
        ("deny", "Deny"),
    ]
    tokens = [action["capability"] for action in actions.values()]
    stored = str(list(PushDelivery.objects.values_list("payload", flat=True)))
    assert "actions" not in stored and not any(token in stored or token in loop.log_text() for token in tokens)

    decided = APIClient().post(
        "/api/v1/approvals/decide",
        {"approvalId": accepted.payload["toolCallId"], "decision": "approve", "capability": tokens[0]},
        format="json",
    )

    assert decided.status_code == 200, decided.content
    run = finished_run(submission_id)
    assert run.state == RunState.COMPLETED
    assert run.submission.assistant_message.text.startswith('Tool save_note returned: {"noteId":')
    replay = APIClient().post(
        "/api/v1/approvals/decide",
        {"approvalId": accepted.payload["toolCallId"], "decision": "deny", "capability": tokens[1]},
        format="json",
    )
    assert (replay.status_code, replay.json()["error"]["code"]) == (409, "capability_used")
